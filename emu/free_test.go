package emu

import "testing"

// TestFreeSymmetricMixups: Free of any GPU's address of a symmetric allocation is an error
// naming FreeSymmetric and frees nothing (every copy stays readable); FreeSymmetric of a
// freed allocation is an error; SymmetricAt finds the allocation from any GPU's copy.
func TestFreeSymmetricMixups(t *testing.T) {
	s := newSys(t, 3)
	m, err := s.MallocSymmetric(64)
	must(t, err)
	for g := 0; g < 3; g++ {
		wantMsg(t, s.Free(m.On(g)), "a symmetric allocation", "FreeSymmetric")
	}
	for g := 0; g < 3; g++ {
		must(t, s.Read(m.On(g), make([]byte, 64)))
		got, err := s.SymmetricAt(m.On(g))
		must(t, err)
		if got != m {
			t.Fatalf("SymmetricAt(GPU %d's copy) = %+v, want %+v", g, got, m)
		}
	}
	_, err = s.SymmetricAt(m.On(1) + 8)
	wantMsg(t, err, "not the start of a live symmetric allocation")
	a := mustMalloc(t, s, 1, 64)
	_, err = s.SymmetricAt(a)
	wantMsg(t, err, "not the start of a live symmetric allocation")
	must(t, s.FreeSymmetric(m))
	wantMsg(t, s.FreeSymmetric(m), "not a live symmetric allocation")
	for g := 0; g < 3; g++ {
		if err := s.Read(m.On(g), make([]byte, 4)); err == nil {
			t.Fatalf("GPU %d's copy readable after FreeSymmetric", g)
		}
	}
	must(t, s.Free(a))
}

// TestModuleVarsFreedOnFailure: when a module's later variable does not fit, the earlier
// ones (symmetric, on every GPU) are freed again, not kept as a leak of the memory limit.
func TestModuleVarsFreedOnFailure(t *testing.T) {
	m := asm(t, `
.global .u32 small[1024];
.global .u32 big[1048576];
.visible .entry k()
{
	ret;
}`)
	s := newSys(t, 2)
	must(t, s.SetLimits(Limits{MaxMemory: 64 << 10}))
	if err := launch1(s, m, "k", 1, 32); err == nil {
		t.Fatal("a 4 MiB module variable fit in 64 KiB")
	}
	if _, err := s.Malloc(0, 64<<10); err != nil {
		t.Fatalf("after the failed launch the limit's whole 64 KiB should be free again: %v", err)
	}
}
