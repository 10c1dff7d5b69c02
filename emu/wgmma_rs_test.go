package emu

import (
	"strings"
	"testing"
)

// wgRSSrc issues a register-A wgmma, then runs ACCESS before or after its wait_group (WHERE).
const wgRSSrc = `
.visible .entry k(.param .u64 pd)
{
	.shared .align 1024 .b8 smem[4096];
	.reg .f32 %d<4>;
	.reg .b32 %a<4>;
	.reg .u64 %rd<4>;
	.reg .pred %p<1>;
	.reg .u32 %r<1>;
	ld.param.u64 %rd0, [pd];
	mov.u64 %rd1, 0;
	mov.b32 %a0, 0;
	mov.b32 %a1, 0;
	mov.b32 %a2, 0;
	mov.b32 %a3, 0;
	mov.u32 %r0, %tid.x;
	setp.eq.u32 %p0, %r0, 0;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, %rd1, 0, 1, 1, 0;
	wgmma.commit_group.sync.aligned;
	BEFORE
	wgmma.wait_group.sync.aligned 0;
	AFTER
	@%p0 st.global.f32 [%rd0], %d0;
	ret;
}
`

// TestWgmmaRegisterAInFlight: the A registers of a register-form wgmma may not be written
// or read before the wait_group that retires it (the PTX ISA makes it undefined); after it
// they are free again.
func TestWgmmaRegisterAInFlight(t *testing.T) {
	run := func(before, after string) error {
		src := strings.NewReplacer("BEFORE", before, "AFTER", after).Replace(wgRSSrc)
		sys := newSys(t, 1)
		pd := mustMalloc(t, sys, 0, 64)
		return launch1(sys, asm(t, src), "k", 1, 128, pd)
	}
	wantErr(t, run("mov.b32 %a2, 7;", ""), KindWgmma, "A register %r", "mov.b32", "before the wgmma.wait_group that retires it")
	wantErr(t, run("@%p0 st.global.b32 [%rd0+4], %a1;", ""), KindWgmma, "A register %r", "st.global.b32")
	if err := run("", "mov.b32 %a2, 7;\n\t@%p0 st.global.b32 [%rd0+4], %a1;"); err != nil {
		t.Fatalf("after wait_group: %v", err)
	}
}
