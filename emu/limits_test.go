package emu

import (
	"strings"
	"testing"
)

func wantMsg(t *testing.T, err error, frags ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error mentioning %q, got nil", frags)
	}
	for _, f := range frags {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q does not mention %q", err, f)
		}
	}
}

// TestAbsurdSizesAreErrors: sizes beyond the limits, and negative lengths, are errors before
// anything is allocated (a fatal out-of-memory or a panic on today's main), and leave the
// System usable.
func TestAbsurdSizesAreErrors(t *testing.T) {
	s := newSys(t, 2)
	_, err := s.Malloc(0, 1<<39)
	wantMsg(t, err, "Malloc of 549755813888 bytes on GPU 0", "Limits.MaxMemory")
	_, err = s.MallocSymmetric(1 << 62)
	wantMsg(t, err, "MallocSymmetric", "out of memory")
	_, err = s.MallocSymmetric(1 << 34) // 16 GiB on each of 2 GPUs
	wantMsg(t, err, "MallocSymmetric of 17179869184 bytes on each of 2 GPUs", "Limits.MaxMemory")
	a := mustMalloc(t, s, 0, 64)
	m, err := s.MallocSymmetric(64)
	must(t, err)
	if m.Off != symBase { // a failed allocation did not move the symmetric heap
		t.Errorf("symmetric offset %#x after failed allocations, want %#x", m.Off, symBase)
	}
	_, err = ReadSlice[float32](s, a, 1<<40)
	wantMsg(t, err, "ReadSlice", "4398046511104 bytes", "past the end of a 64-byte Malloc allocation")
	_, err = ReadSlice[uint64](s, a, 1<<62)
	wantMsg(t, err, "ReadSlice", "larger than any allocation")
	_, err = ReadSlice[uint64](s, a, 9)
	wantMsg(t, err, "ReadSlice", "run 8 bytes past the end of a 64-byte Malloc allocation")
	_, err = ReadSlice[float32](s, a, -1)
	wantMsg(t, err, "ReadSlice of -1 elements", "negative")
	_, err = ReadF16(s, a, -5)
	wantMsg(t, err, "negative")
	wantMsg(t, s.Copy(m.On(1), a, -4), "Copy source of -4 bytes", "negative")
	wantMsg(t, s.Copy(m.On(1), a, 1<<40), "Copy source", "past the end")
	wantMsg(t, s.Copy(m.On(1)+32, a, 64), "Copy destination", "past the end")
	wantMsg(t, s.Memset(a, 1, -1), "Memset of -1 bytes")
	wantMsg(t, s.Memset(a, 1, 1<<40), "Memset", "past the end")
	wantMsg(t, s.FreeSymmetric(nil), "FreeSymmetric(nil)")
	must(t, s.Copy(m.Multicast(), a, 64))
	must(t, s.Memset(a, 7, 64))

	// The limit is the System's: lower it and a Malloc that fitted no longer does; freeing
	// gives the bytes back.
	must(t, s.SetLimits(Limits{MaxMemory: 1 << 20}))
	_, err = s.Malloc(1, 1<<20)
	wantMsg(t, err, "limit of 1048576 bytes")
	must(t, s.Free(a))
	must(t, s.FreeSymmetric(m))
	b := mustMalloc(t, s, 1, 1<<20)
	must(t, s.Free(b))
	if got := s.Limits().MaxThreads; got != DefaultLimits.MaxThreads {
		t.Errorf("MaxThreads %d after SetLimits without it, want the default %d", got, DefaultLimits.MaxThreads)
	}
}

// TestAbsurdKernelsAreErrors: a 1 GiB .local array, a 1 TiB .global variable, a huge
// .param array and grids a GPU cannot launch fail at launch with an error naming the limit.
func TestAbsurdKernelsAreErrors(t *testing.T) {
	s := newSys(t, 2)
	m := asm(t, `
.global .align 4 .u32 huge[274877906944];
.visible .entry bigglobal(.param .u64 out)
{
	.reg .u64 %rd<2>;
	mov.u64 %rd0, huge;
	ret;
}`)
	// Module variables are allocated at the first launch of the module.
	err := s.Launch(Launch{Module: m, Entry: "bigglobal", Grid: D1(1), Block: D1(1), Args: []any{uint64(0)}})
	wantMsg(t, err, "module variable huge", "Limits.MaxMemory")

	s2 := newSys(t, 1)
	m2 := asm(t, `
.visible .entry biglocal(.param .u64 out)
{
	.local .align 4 .b8 arr[1073741824];
	.reg .u64 %rd<2>;
	mov.u64 %rd0, arr;
	ret;
}`)
	m3 := asm(t, `
.visible .entry bigparam(.param .align 4 .b8 p[1099511627776])
{
	ret;
}`)
	m4 := asm(t, `
.visible .entry small(.param .u64 out)
{
	.local .align 4 .b8 arr[524288];
	.reg .u64 %rd<2>;
	.reg .u32 %r<2>;
	mov.u64 %rd0, arr;
	mov.u32 %r0, 1;
	st.local.u32 [%rd0], %r0;
	ret;
}`)
	err = s2.Launch(Launch{Module: m2, Entry: "biglocal", Grid: D1(1), Block: D1(1), Args: []any{uint64(0)}})
	wantMsg(t, err, "1073741824 bytes of local memory per thread", "at most 524288")
	err = s2.Launch(Launch{Module: m3, Entry: "bigparam", Grid: D1(1), Block: D1(1), Args: []any{make([]byte, 8)}})
	wantMsg(t, err, "bytes of kernel parameters", "at most 4352") // ptx.Verify's limit for PTX 8.0 (32764 from 8.1)
	// 512 KiB of local memory per thread is legal, but 1024 such threads hold 512 MiB.
	must(t, s2.SetLimits(Limits{MaxMemory: 256 << 20}))
	err = s2.Launch(Launch{Module: m4, Entry: "small", Grid: D1(1), Block: D1(1024), Args: []any{uint64(0)}})
	wantMsg(t, err, "live blocks", "Limits.MaxMemory")
	must(t, s2.Launch(Launch{Module: m4, Entry: "small", Grid: D1(4), Block: D1(64), Args: []any{uint64(0)}}))

	for _, c := range []struct {
		grid, block Dim3
		frag        string
	}{
		{Dim3{1, 65536, 1}, D1(32), "at most 2147483647 blocks in x and 65535 in y and z"},
		{Dim3{1, 1, 65536}, D1(32), "65535 in y and z"},
		{D1(1 << 31), D1(1), "2147483647 blocks in x"},
		{D1(-1), D1(1), "must be positive"},
		{D1(1), D1(1025), "at most 1024 threads"},
		{D1(1), Dim3{1, 1, 65}, "z <= 64"},
		{D1(1<<31 - 1), D1(1024), "runs 2199023254528 threads; the emulator's limit is 4294967296 (Limits.MaxThreads)"},
		{Dim3{65535, 65535, 2}, D1(1), "runs 8589672450 threads"},
	} {
		err := s2.Launch(Launch{Module: m4, Entry: "small", Grid: c.grid, Block: c.block, Args: []any{uint64(0)}})
		wantErr(t, err, KindLaunch, c.frag)
	}
}
