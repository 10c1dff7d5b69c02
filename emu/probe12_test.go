package emu

import "testing"

// TestProbe12Mbarrier: mbarrier operations whose counts do not fit the object (PTX: 1 to
// 2^20-1 arrivals, a transaction count within ±(2^20-1)) or whose address is not in shared
// memory fail naming the value or the address. Before: the counts wrapped in the emulator's
// 21-bit fields, so mbarrier.init with 2^21+1 expected one arrival and expect_tx of 2 MiB
// none (each phase completed at once, and the waits reported success), and an mbarrier in
// global memory was written there as if it were one.
func TestProbe12Mbarrier(t *testing.T) {
	run := func(body string) error {
		m := asm(t, `
.visible .entry k(.param .u64 a)
{
	.shared .align 8 .b64 bar;
	.reg .b32 %r<4>;
	.reg .b64 %rd<4>;
	.reg .pred %p<2>;
	ld.param.u64 %rd1, [a];
	mov.u64 %rd2, bar;
	`+body+`
	ret;
}`)
		s := newSys(t, 1)
		a := mustMalloc(t, s, 0, 64)
		return launch1(s, m, "k", 1, 1, a)
	}
	for _, c := range []struct {
		name, body string
		kind       Kind
		want       string
	}{
		{"init 2^21+1", "mov.u32 %r1, 2097153;\n\tmbarrier.init.shared.b64 [%rd2], %r1;", KindBarrier, "2097153"},
		{"init 2^20", "mov.u32 %r1, 1048576;\n\tmbarrier.init.shared.b64 [%rd2], %r1;", KindBarrier, "1048576"},
		{"init 0", "mov.u32 %r1, 0;\n\tmbarrier.init.shared.b64 [%rd2], %r1;", KindBarrier, "count 0"},
		{"expect_tx 2^21", "mbarrier.init.shared.b64 [%rd2], 1;\n\tmov.u32 %r1, 2097152;\n\tmbarrier.expect_tx.shared.b64 [%rd2], %r1;", KindBarrier, "2097152"},
		{"expect_tx sum past 2^20-1", "mbarrier.init.shared.b64 [%rd2], 1;\n\tmbarrier.expect_tx.shared.b64 [%rd2], 1000000;\n\tmbarrier.expect_tx.shared.b64 [%rd2], 1000000;", KindBarrier, "transaction count"},
		{"arrive.expect_tx 2^20", "mbarrier.init.shared.b64 [%rd2], 1;\n\tmov.u32 %r1, 1048576;\n\tmbarrier.arrive.expect_tx.shared.b64 %rd3, [%rd2], %r1;", KindBarrier, "1048576"},
		{"complete_tx 2^21", "mbarrier.init.shared.b64 [%rd2], 1;\n\tmov.u32 %r1, 2097152;\n\tmbarrier.complete_tx.shared.b64 [%rd2], %r1;", KindBarrier, "2097152"},
		{"arrive count 2^21", "mbarrier.init.shared.b64 [%rd2], 4;\n\tmov.u32 %r1, 2097152;\n\tmbarrier.arrive.shared.b64 %rd3, [%rd2], %r1;", KindBarrier, "2097152"},
		{"in global memory", "mbarrier.init.b64 [%rd1], 1;", KindBadAddress, "not in shared memory"},
		{"arrive in global memory", "mbarrier.arrive.b64 %rd3, [%rd1];", KindBadAddress, "not in shared memory"},
	} {
		t.Run(c.name, func(t *testing.T) { wantErr(t, run(c.body), c.kind, c.want) })
	}
	// The limits themselves, and a generic address of shared memory, still work.
	for _, body := range []string{
		"mov.u32 %r1, 1048575;\n\tmbarrier.init.shared.b64 [%rd2], %r1;\n\tmbarrier.arrive.shared.b64 %rd3, [%rd2], %r1;\n\tmbarrier.test_wait.shared.b64 %p1, [%rd2], %rd3;",
		"mbarrier.init.shared.b64 [%rd2], 1;\n\tmbarrier.expect_tx.shared.b64 [%rd2], 1048575;\n\tmbarrier.complete_tx.shared.b64 [%rd2], 1048575;",
		"cvta.shared.u64 %rd3, %rd2;\n\tmbarrier.init.b64 [%rd3], 1;\n\tmbarrier.arrive.b64 %rd3, [%rd3];",
	} {
		if err := run(body); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}
