package emu

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// probe7Kernels are hostile kernels: barrier counts and ids out of the PTX rules, an
// mbarrier that never completes, accesses outside shared and global memory, and integer
// division by zero. Each names what it breaks.
var probe7Kernels = []struct {
	name, src string
	block     int
	kind      Kind // "" means: the launch must succeed
	want      []string
}{
	{"bar count not a warp multiple", `
.visible .entry k(.param .u64 a)
{
	bar.sync 1, 33;
	ret;
}`, 64, Kind(""), []string{"33", "multiple of 32"}},
	{"bar id 16", `
.visible .entry k(.param .u64 a)
{
	bar.sync 16;
	ret;
}`, 64, Kind(""), []string{"16"}},
	{"bar count above the block", `
.visible .entry k(.param .u64 a)
{
	bar.sync 1, 128;
	ret;
}`, 64, "", []string{"barrier 1", "128"}},
	{"bar count register 0", `
.visible .entry k(.param .u64 a)
{
	.reg .u32 %r<2>;
	mov.u32 %r0, 0;
	bar.sync 1, %r0;
	ret;
}`, 64, KindBarrier, []string{"barrier 1: thread count 0 must be a positive multiple of 32"}},
	{"bar count register 48", `
.visible .entry k(.param .u64 a)
{
	.reg .u32 %r<2>;
	mov.u32 %r0, 48;
	bar.sync 2, %r0;
	ret;
}`, 64, KindBarrier, []string{"barrier 2: thread count 48 must be a positive multiple of 32"}},
	{"bar.arrive and bar.sync count register 64", `
.visible .entry k(.param .u64 a)
{
	.reg .u32 %r<2>;
	.reg .pred %p<2>;
	mov.u32 %r0, %tid.x;
	setp.lt.u32 %p0, %r0, 32;
	mov.u32 %r1, 64;
	@%p0 bar.arrive 3, %r1;
	@!%p0 bar.sync 3, %r1;
	ret;
}`, 64, "", nil},
	{"mbarrier never completed", `
.visible .entry k(.param .u64 a)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<4>;
	.reg .pred %p<4>;
	.shared .align 8 .b8 bar[8];
	mov.u32 %r0, %tid.x;
	setp.eq.u32 %p0, %r0, 0;
	mov.u64 %rd0, bar;
	@%p0 mbarrier.init.shared.b64 [%rd0], 2;
	bar.sync 0;
	@%p0 mbarrier.arrive.shared.b64 %rd1, [%rd0];
W:
	mbarrier.try_wait.parity.shared.b64 %p1, [%rd0], 0;
	@!%p1 bra W;
	ret;
}`, 32, KindDeadlock, []string{"mbarrier", "bar"}},
	{"shared load past the end", `
.visible .entry k(.param .u64 a)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<4>;
	.shared .align 4 .b8 sh[64];
	mov.u64 %rd0, sh;
	ld.shared.u32 %r0, [%rd0+4096];
	ret;
}`, 32, KindOutOfBounds, []string{"ld.shared.u32"}},
	{"global load of address 0", `
.visible .entry k(.param .u64 a)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<4>;
	mov.u64 %rd0, 0;
	ld.global.u32 %r0, [%rd0];
	ret;
}`, 32, KindBadAddress, []string{"null pointer", "ld.global.u32"}},
	{"global store far away", `
.visible .entry k(.param .u64 a)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<4>;
	ld.param.u64 %rd0, [a];
	add.u64 %rd1, %rd0, -8;
	st.global.u32 [%rd1], 1;
	ret;
}`, 32, KindOutOfBounds, []string{"st.global.u32"}},
	{"integer division by zero", `
.visible .entry k(.param .u64 a)
{
	.reg .u64 %rd<4>;
	.reg .u32 %r<8>;
	.reg .s32 %s<8>;
	ld.param.u64 %rd0, [a];
	mov.u32 %r0, 7;
	mov.u32 %r1, 0;
	div.u32 %r2, %r0, %r1;
	rem.u32 %r3, %r0, %r1;
	mov.s32 %s0, -2147483648;
	mov.s32 %s1, -1;
	div.s32 %s2, %s0, %s1;
	rem.s32 %s3, %s0, %s1;
	mov.s32 %s4, 0;
	div.s32 %s5, %s0, %s4;
	st.global.u32 [%rd0], %r2;
	ret;
}`, 1, "", nil},
}

func TestProbe7HostileKernels(t *testing.T) {
	for _, c := range probe7Kernels {
		t.Run(c.name, func(t *testing.T) {
			m := asm(t, c.src)
			s := newSys(t, 1)
			a := mustMalloc(t, s, 0, 64)
			done := make(chan error, 1)
			go func() {
				defer func() {
					if p := recover(); p != nil {
						done <- fmt.Errorf("panic: %v", p)
					}
				}()
				done <- launch1(s, m, "k", 1, c.block, a)
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("no answer in 60 s")
			}
			t.Log(err)
			if c.kind == "" && c.want == nil {
				if err != nil {
					t.Fatalf("want success, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ran without an error; want one mentioning %q", c.want)
			}
			if strings.HasPrefix(err.Error(), "panic") {
				t.Fatal(err)
			}
			if c.kind != "" {
				wantErr(t, err, c.kind, c.want...)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q", w)
				}
			}
		})
	}
}
