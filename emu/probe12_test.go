package emu

import (
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

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

// TestProbe12ParamAddress: kernel parameters read through an address: a constant offset
// before the parameters is an out-of-bounds error naming the offset, and an address taken
// with mov (the PTX ISA: "the address of a kernel parameter may be moved into a register
// ... and accessed using ld.param") reads the parameter. Before: [b+-16] slipped past the
// bounds check by wrapping and failed as an "emulator bug: slice bounds out of range", and
// ld.param through a register holding a kernel parameter's address was looked up in local
// memory ("each thread has 0 bytes of local memory").
func TestProbe12ParamAddress(t *testing.T) {
	run := func(body string) ([]uint64, error) {
		m, err := ptx.Parse(".version 8.4\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 a, .param .u64 b)\n{\n\t.reg .b64 %rd<8>;\n\tld.param.u64 %rd1, [a];\n" + body + "\n\tret;\n}\n")
		if err != nil {
			t.Fatal(err)
		}
		s := newSys(t, 1)
		a := mustMalloc(t, s, 0, 64)
		if err := launch1(s, m, "k", 1, 1, a, uint64(0x1234)); err != nil {
			return nil, err
		}
		return ReadSlice[uint64](s, a, 2)
	}
	var got []uint64
	for _, body := range []string{"\tld.param.u64 %rd2, [b+-16];", "\tld.param.u64 %rd2, [a+-8];", "\tmov.u64 %rd3, b;\n\tld.param.u64 %rd2, [%rd3+8];"} {
		_, err := run(body)
		wantErr(t, err, KindOutOfBounds, "parameter offset", "the parameters take 16 bytes")
	}
	// Below the parameters' address window: out of bounds too (of another space).
	_, err := run("\tmov.u64 %rd3, b;\n\tld.param.u64 %rd2, [%rd3+-16];")
	wantErr(t, err, KindOutOfBounds, "offset")
	got, err = run("\tmov.u64 %rd3, b;\n\tld.param.u64 %rd2, [%rd3];\n\tst.global.u64 [%rd1], %rd2;\n\tmov.u64 %rd4, a;\n\tld.param.u64 %rd5, [%rd4+8];\n\tst.global.u64 [%rd1+8], %rd5;")
	if err != nil || got[0] != 0x1234 || got[1] != 0x1234 {
		t.Errorf("ld.param through mov'd kernel parameter addresses: %#x, %v; want [0x1234 0x1234]", got, err)
	}
}
