//go:build cuda && cgo

package jit

// GPU tests: they run where a CUDA driver and GPUs are (scripts/gpu-test.sh builds them here
// and prints the command that runs them on a GPU machine). Without a driver they skip, after
// checking that the error explains itself, unless KGEN_REQUIRE_GPU=1, which makes them fail.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/ptx"
)

// putModule is the signature of testdata/put_block.ptx (the PTX text itself is loaded).
func putModule() *ptx.Module {
	return &ptx.Module{Target: ptx.SM90, Funcs: []*ptx.Func{
		{Name: "nvshmemx_putmem_block", Extern: true, Params: []ptx.Param{
			{Name: "dest", Type: ptx.B64}, {Name: "source", Type: ptx.B64}, {Name: "nelems", Type: ptx.B64}, {Name: "pe", Type: ptx.B32}}},
		{Name: "put_block", Entry: true, Visible: true, Params: []ptx.Param{
			{Name: "dst", Type: ptx.U64}, {Name: "src", Type: ptx.U64}, {Name: "nbytes", Type: ptx.U64}, {Name: "pe", Type: ptx.U32}}},
	}}
}

func openGPUOrSkip(t *testing.T, ordinal int, opts ...Option) *Device {
	t.Helper()
	d, err := OpenBackend(GPU, ordinal, opts...)
	if err != nil {
		if os.Getenv("KGEN_REQUIRE_GPU") == "1" {
			t.Fatal(err)
		}
		if !strings.Contains(err.Error(), "no CUDA driver") && !strings.Contains(err.Error(), "cuInit failed") && !strings.Contains(err.Error(), "no GPU") {
			t.Fatalf("the error does not say what is missing: %v", err)
		}
		t.Skip(err)
	}
	return d
}

// timing prints a line scripts/gpu-test.sh collects.
func timing(t *testing.T, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	t.Log(msg)
	fmt.Printf("TIMING %s\n", msg)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

func TestGPUVectorAdd(t *testing.T) {
	// kgen's cubin cache holds what cuLink produces.
	t.Setenv(JITModeEnv, "link")
	cache := NewCache(t.TempDir())
	d := openGPUOrSkip(t, 0, WithCache(cache))
	defer d.Close()
	inf := d.Info()
	t.Logf("GPU 0: %s %s, driver %d, %d SMs, %d MiB, libcuda %s", inf.Name, inf.Arch, inf.DriverVersion, inf.Multiproc, inf.TotalMem>>20, driverPath())
	src := Source{Module: vectorAdd(t)}

	// Cold: link through cuLink and store the cubin.
	m, err := d.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	if st.CacheHit {
		t.Fatal("cold load hit the cache")
	}
	timing(t, "vector_add cold: link %s, load %s, cubin %d bytes", ms(st.Link), ms(st.Load), st.CubinLen)
	fn, err := m.Function("vector_add_f32")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = float32(i)*0.5, float32(n-i)
	}
	da, _ := Alloc[float32](d, n)
	db, _ := Alloc[float32](d, n)
	dc, err := Alloc[float32](d, n)
	if err != nil {
		t.Fatal(err)
	}
	defer da.Free()
	defer db.Free()
	defer dc.Free()
	if err := da.CopyFromHost(a); err != nil {
		t.Fatal(err)
	}
	if err := db.CopyFromHost(b); err != nil {
		t.Fatal(err)
	}
	cfg := LaunchConfig{Grid: D1((n + 255) / 256), Block: D1(256)}
	t0 := time.Now()
	if err := fn.Launch(cfg, da, db, dc, uint32(n)); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	first := time.Since(t0)
	t0 = time.Now()
	if err := fn.Launch(cfg, da, db, dc, uint32(n)); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	second := time.Since(t0)
	timing(t, "vector_add launch+sync: first %s, second %s", ms(first), ms(second))
	if err := dc.CopyToHost(c); err != nil {
		t.Fatal(err)
	}
	for i := range c {
		if c[i] != a[i]+b[i] {
			t.Fatalf("c[%d] = %v, want %v", i, c[i], a[i]+b[i])
		}
	}

	// Warm: a second device handle with the same cache loads the stored cubin.
	d2 := openGPUOrSkip(t, 0, WithCache(cache))
	defer d2.Close()
	m2, err := d2.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	if !m2.Stats().CacheHit {
		t.Fatal("warm load missed the cache")
	}
	timing(t, "vector_add warm: link %s (cache hit), load %s", ms(m2.Stats().Link), ms(m2.Stats().Load))
	// Cache off: links again.
	d3 := openGPUOrSkip(t, 0, WithCache(nil))
	defer d3.Close()
	m3, err := d3.Load(src)
	if err != nil || m3.Stats().CacheHit {
		t.Fatalf("cache off: hit=%v err=%v", m3 != nil && m3.Stats().CacheHit, err)
	}
	timing(t, "vector_add cache off: link %s, load %s", ms(m3.Stats().Link), ms(m3.Stats().Load))
	// Whole program: the driver compiles; kgen's cache is not consulted.
	t.Setenv(JITModeEnv, "whole")
	m4, err := d2.Load(src)
	if err != nil || m4.Stats().CacheHit || m4.Stats().Key != "" || m4.Stats().Load <= 0 {
		t.Fatalf("whole-program load: %+v, %v (want no cache key, a compile in Load)", m4 != nil && m4.Stats().CacheHit, err)
	}
	if _, err := m4.Function("vector_add_f32"); err != nil {
		t.Fatal(err)
	}
	timing(t, "vector_add whole program: load %s", ms(m4.Stats().Load))

	// Streams, async copies and events.
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e0, _ := d.NewEvent()
	e1, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		a[i] = 1
	}
	if err := da.CopyFromHostAsync(a, s); err != nil {
		t.Fatal(err)
	}
	e0.Record(s)
	if err := fn.Launch(LaunchConfig{Grid: cfg.Grid, Block: cfg.Block, Stream: s}, da, db, dc, uint32(n)); err != nil {
		t.Fatal(err)
	}
	e1.Record(s)
	if err := dc.CopyToHostAsync(c, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	el, err := e0.Elapsed(e1)
	if err != nil {
		t.Fatal(err)
	}
	timing(t, "vector_add 1M f32 kernel (events): %s", ms(el))
	for i := range c {
		if c[i] != 1+b[i] {
			t.Fatalf("stream: c[%d] = %v, want %v", i, c[i], 1+b[i])
		}
	}
	// D2D copy.
	if err := db.CopyFrom(dc); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 4)
	db.CopyToHost(got)
	if got[3] != c[3] {
		t.Fatalf("D2D: %v vs %v", got[3], c[3])
	}
	// Wrong arguments never reach the driver.
	if err := fn.Launch(cfg, da, db, dc); err == nil || !strings.Contains(err.Error(), "takes 4 arguments") {
		t.Fatalf("got %v", err)
	}
	// A PTX text that does not match the signature it came with is caught at Function.
	wrong := vectorAdd(t)
	fcopy := *wrong.Funcs[len(wrong.Funcs)-1]
	fcopy.Params = fcopy.Params[:3]
	var text strings.Builder
	ptx.Print(&text, vectorAdd(t))
	mw, err := d.Load(Source{Module: &ptx.Module{Target: wrong.Target, Funcs: []*ptx.Func{&fcopy}}, PTX: []byte(text.String())})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mw.Function("vector_add_f32"); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched signature: %v", err)
	} else {
		t.Log(err)
	}
	if _, err := OpenBackend(GPU, 99); err == nil || !strings.Contains(err.Error(), "no GPU 99") {
		t.Fatalf("Open(99): %v", err)
	}
}

func driverPath() string { return cudrvPath() }

// A process that sees no GPU gets an error from Open instead of gorgonia's os.Exit(1).
func TestGPUNoDeviceIsAnError(t *testing.T) {
	if os.Getenv("KGEN_TEST_NO_DEVICE_CHILD") == "1" {
		_, err := OpenBackend(GPU, 0)
		fmt.Printf("OPEN-ERROR: %v\n", err)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGPUNoDeviceIsAnError$", "-test.v")
	cmd.Env = append(os.Environ(), "KGEN_TEST_NO_DEVICE_CHILD=1", "CUDA_VISIBLE_DEVICES=")
	out, err := cmd.CombinedOutput()
	t.Logf("child with CUDA_VISIBLE_DEVICES='':\n%s", out)
	if err != nil {
		t.Fatalf("the child exited: %v (gorgonia's init must not end the process)", err)
	}
	if !strings.Contains(string(out), "OPEN-ERROR: jit: ") {
		t.Fatalf("the child did not report an Open error")
	}
}

func testDevLib(t *testing.T) *DevLib {
	p, a := os.Getenv("KGEN_TEST_DEVLIB_PTX"), os.Getenv("KGEN_TEST_DEVLIB_ARCHIVE")
	if p == "" || a == "" {
		t.Skip("set KGEN_TEST_DEVLIB_PTX and KGEN_TEST_DEVLIB_ARCHIVE (scripts/gpu-test.sh does) to run the NVSHMEM test")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return &DevLib{PTX: b, Archive: a, Version: os.Getenv("KGEN_TEST_DEVLIB_VERSION")}
}

// TestGPUNVSHMEMPut launches 2 ranks of this test binary (LaunchRanks, as `kgen launch`
// does); each runs TestGPUNVSHMEMPutRank.
func TestGPUNVSHMEMPut(t *testing.T) {
	if os.Getenv("KGEN_TEST_PUT_CHILD") == "1" {
		t.Skip("child")
	}
	testDevLib(t)
	d := openGPUOrSkip(t, 0)
	cnt, _ := numGPUs()
	d.Close()
	if cnt < 2 {
		t.Skipf("needs 2 GPUs, %d visible", cnt)
	}
	code, err := LaunchRanks(context.Background(), LaunchOptions{
		N: 2, Prog: os.Args[0], Args: []string{"-test.run=^TestGPUNVSHMEMPutRank$", "-test.v", "-test.count=1"},
		Env: []string{"KGEN_TEST_PUT_CHILD=1", "KGEN_BOOTSTRAP_TIMEOUT=60s", "KGEN_CACHE_DIR=" + t.TempDir()},
	})
	if err != nil || code != 0 {
		t.Fatalf("ranks failed: code %d: %v", code, err)
	}
}

func TestGPUNVSHMEMPutRank(t *testing.T) {
	if os.Getenv("KGEN_TEST_PUT_CHILD") != "1" {
		t.Skip("run by TestGPUNVSHMEMPut")
	}
	dl := testDevLib(t)
	rv, err := RendezvousFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	d := openGPUOrSkip(t, rv.LocalRank)
	defer d.Close()
	t0 := time.Now()
	sh, err := InitNVSHMEM(d, InitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	timing(t, "rank %d: InitNVSHMEM %s (host library %s, NVSHMEM %s)", rv.Rank, ms(time.Since(t0)), sh.LibPath(), sh.Version())
	defer func() {
		if err := sh.Finalize(); err != nil {
			t.Error(err)
		}
	}()
	me, npes := sh.MyPE(), sh.NPEs()
	peer := (me + 1) % npes
	text, err := os.ReadFile(filepath.Join("testdata", "put_block.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	// A device library from another NVSHMEM is refused before anything is linked.
	bad := *dl
	bad.Version = "0.0.1"
	if _, err := d.Load(Source{Module: putModule(), PTX: text, DevLib: &bad}); !errors.As(err, new(*VersionError)) {
		t.Fatalf("version mismatch: got %v", err)
	}
	m, err := d.Load(Source{Module: putModule(), PTX: text, DevLib: dl})
	if err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	timing(t, "rank %d: put_block load (hit=%v): link %s, load+cumodule_init %s, cubin %d bytes", rv.Rank, st.CacheHit, ms(st.Link), ms(st.Load), st.CubinLen)
	fn, err := m.Function("put_block")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 18 // 1 MiB of float32
	src, err := SymAlloc[float32](sh, n)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := SymAlloc[float32](sh, n)
	if err != nil {
		t.Fatal(err)
	}
	host := make([]float32, n)
	for i := range host {
		host[i] = float32(me*1000000 + i)
	}
	if err := src.CopyFromHost(host); err != nil {
		t.Fatal(err)
	}
	if err := dst.CopyFromHost(make([]float32, n)); err != nil {
		t.Fatal(err)
	}
	if pp, err := sh.PeerPtr(dst, peer); err != nil {
		t.Logf("rank %d: %v", me, err)
	} else {
		t.Logf("rank %d: peer %d's dst at %#x (mine %#x)", me, peer, pp, dst.DevPtr())
	}
	if mc, err := sh.MulticastPtr(dst); err == nil {
		t.Logf("rank %d: multicast address %#x", me, mc)
	} else {
		var mce *MulticastError
		if !errors.As(err, &mce) {
			t.Fatalf("MulticastPtr: %v", err)
		}
		t.Logf("multicast: %v", err)
	}
	if err := sh.BarrierAll(); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(256)}, dst, src, uint64(4*n), uint32(peer)); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	first := time.Since(t0)
	if err := sh.BarrierAll(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := dst.CopyToHost(got); err != nil {
		t.Fatal(err)
	}
	from := (me - 1 + npes) % npes
	for i := range got {
		if want := float32(from*1000000 + i); got[i] != want {
			t.Fatalf("rank %d: dst[%d] = %v, want %v (from PE %d)", me, i, got[i], want, from)
		}
	}
	// Second launch, on a stream, with the stream-ordered barrier.
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e0, _ := d.NewEvent()
	e1, _ := d.NewEvent()
	e0.Record(s)
	if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(1024), Stream: s}, dst, src, uint64(4*n), uint32(peer)); err != nil {
		t.Fatal(err)
	}
	e1.Record(s)
	if err := sh.BarrierAllOnStream(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	el, _ := e0.Elapsed(e1)
	timing(t, "rank %d: put_block 1 MiB: first launch+sync %s; on a stream (1 block x 1024) %s = %.1f GB/s", me, ms(first), ms(el), 4*n/el.Seconds()/1e9)
	if math.IsNaN(float64(got[0])) {
		t.Fatal("NaN")
	}
	// Reload: the cubin comes from the cache the two ranks share.
	m.Close()
	m2, err := d.Load(Source{Module: putModule(), PTX: text, DevLib: dl})
	if err != nil {
		t.Fatal(err)
	}
	timing(t, "rank %d: put_block reload (hit=%v): link %s, load+cumodule_init %s", rv.Rank, m2.Stats().CacheHit, ms(m2.Stats().Link), ms(m2.Stats().Load))
	if !m2.Stats().CacheHit {
		t.Error("reload missed the cache")
	}
}

// TestGPURanksPeerToPeer runs the emulator's peer-to-peer program (ringProgram, the same
// code TestEmuRanksPeerToPeer runs on simulated GPUs) on 2 GPUs: LaunchRanks starts 2 ranks
// of this test binary, each running TestGPURanksPeerToPeerRank through RunRanks.
func TestGPURanksPeerToPeer(t *testing.T) {
	if os.Getenv("KGEN_TEST_RING_CHILD") == "1" {
		t.Skip("child")
	}
	d := openGPUOrSkip(t, 0)
	cnt, _ := numGPUs()
	d.Close()
	if cnt < 2 {
		t.Skipf("needs 2 GPUs, %d visible", cnt)
	}
	code, err := LaunchRanks(context.Background(), LaunchOptions{
		N: 2, Prog: os.Args[0], Args: []string{"-test.run=^TestGPURanksPeerToPeerRank$", "-test.v", "-test.count=1"},
		Env: []string{"KGEN_TEST_RING_CHILD=1", "KGEN_BOOTSTRAP_TIMEOUT=60s", "KGEN_CACHE_DIR=" + t.TempDir()},
	})
	if err != nil || code != 0 {
		t.Fatalf("ranks failed: code %d: %v", code, err)
	}
}

func TestGPURanksPeerToPeerRank(t *testing.T) {
	if os.Getenv("KGEN_TEST_RING_CHILD") != "1" {
		t.Skip("run by TestGPURanksPeerToPeer")
	}
	if err := RunRanks(RanksOptions{Backend: GPU, NVSHMEM: true}, ringProgram(ringKernel(t), 256)); err != nil {
		t.Fatal(err)
	}
}
