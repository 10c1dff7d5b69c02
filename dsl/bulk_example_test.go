package dsl_test

import (
	"fmt"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// A block pushes a row of 4 KiB to a peer GPU: every thread writes its part of a shared
// staging buffer, fences it for the async proxy, the block synchronises, one elected thread
// issues the bulk store through the peer pointer and waits for it to complete before
// releasing the peer's flag.
func ExampleKernel_BulkStore() {
	k := dsl.New("push_row", dsl.WithTarget(ptx.SM90a))
	src, peer := k.PtrParam("src", dsl.F32), k.PtrParam("peer", dsl.F32) // peer: nvshmem_ptr / PeerTable.Peer
	flag := k.PtrParam("peer_flag", dsl.U32)
	stage := k.SharedArray(dsl.F32, 1024)
	tid := k.ThreadIdx(dsl.X)
	k.For(tid, 1024, k.BlockDim(dsl.X), func(i dsl.Value) {
		k.Store(stage.At(i), k.Load(src.At(i)).Mul(float32(2)))
	})
	k.FenceProxyAsync() // each writer: its shared stores before the async proxy reads them
	k.SyncThreads()
	k.If(tid.Lt(uint32(32)).And(k.ElectOne()), func() { // one thread of warp 0
		k.BulkStore(peer, stage, 4096)
		k.BulkCommit()
		k.BulkWait(0, false) // written, not only read: now it may be published
		k.Store(flag, 1, dsl.Release(dsl.System))
	})
	m, err := k.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(m.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "cp.async.bulk") || strings.Contains(line, "fence.proxy") {
			fmt.Println(strings.TrimSpace(line))
		}
	}
	// Output:
	// fence.proxy.async.shared::cta;
	// cp.async.bulk.global.shared::cta.bulk_group [%ud3], [%ud6], 4096;
	// cp.async.bulk.commit_group;
	// cp.async.bulk.wait_group 0;
}
