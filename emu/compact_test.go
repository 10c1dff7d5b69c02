package emu

import "testing"

// TestWithoutCompaction runs the hand-written kernels again with register compaction off:
// the packing must not change what any of them computes (and the tests above run with it on).
func TestWithoutCompaction(t *testing.T) {
	noCompact = true
	defer func() { noCompact = false }()
	for name, f := range map[string]func(*testing.T){
		"instructions": TestInstructions, "blockreduce": TestBlockReduceSharedBarrier, "warpops": TestWarpOps,
		"atomics": TestAtomics, "syncops": TestSyncOps, "ir": TestIRForms, "calls": TestCallsAndExtern,
		"multimem": TestMultimem, "mbarrier": TestMbarrierAndBulkCopy, "allreduce": TestAllReduceSmall,
	} {
		t.Run(name, f)
	}
}

// TestCompactionShrinksRegisterFiles checks that SSA-style code shares slots.
func TestCompactionShrinksRegisterFiles(t *testing.T) {
	src := ".visible .entry chain(.param .u64 out)\n{\n\t.reg .u32 %r<200>;\n\t.reg .u64 %rd<2>;\n\tld.param.u64 %rd0, [out];\n\tmov.u32 %r0, %tid.x;\n"
	for i := 1; i < 200; i++ {
		src += "\tadd.u32 %r" + itoa(i) + ", %r" + itoa(i-1) + ", 3;\n"
	}
	src += "\tst.global.u32 [%rd0], %r199;\n\tret;\n}"
	m := asm(t, src)
	s := newSys(t, 1)
	out := mustMalloc(t, s, 0, 4)
	must(t, launch1(s, m, "chain", 1, 1, out))
	if got := readU32(t, s, out, 1)[0]; got != 3*199 {
		t.Fatalf("got %d", got)
	}
	if n := s.progs[m].nslots; n > 10 {
		t.Fatalf("%d slots for a chain of 200 registers", n)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}
