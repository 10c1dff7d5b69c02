package emu

import (
	"testing"
)

const dynSharedSrc = `
.extern .shared .align 16 .b8 dyn[];
.global .align 4 .u32 table[4] = {10, 20, 30, 40};
.const .align 4 .u32 scale = 3;
.visible .entry dyns(.param .u64 out)
{
	.reg .u64 %rd<8>;
	.reg .u32 %r<12>;
	ld.param.u64 %rd0, [out];
	mov.u32 %r0, %tid.x;
	mov.u32 %r1, %tid.y;
	mov.u32 %r2, %ntid.x;
	mad.lo.u32 %r3, %r1, %r2, %r0;
	mov.u32 %r4, %ctaid.x;
	mov.u32 %r5, %ctaid.z;
	mov.u32 %r6, %dynamic_smem_size;
	mov.u64 %rd1, dyn;
	mul.wide.u32 %rd2, %r3, 4;
	add.u64 %rd3, %rd1, %rd2;
	st.shared.u32 [%rd3], %r3;
	bar.sync 0;
	ld.shared.u32 %r7, [dyn+4];
	and.b32 %r8, %r3, 3;
	mul.wide.u32 %rd4, %r8, 4;
	mov.u64 %rd5, table;
	add.u64 %rd5, %rd5, %rd4;
	ld.global.u32 %r9, [%rd5];
	ld.const.u32 %r10, [scale];
	mul.lo.u32 %r9, %r9, %r10;
	// out[block][thread] = {r7 + r9, dynamic size, ctaid.z}
	mov.u32 %r11, %nctaid.x;
	mad.lo.u32 %r11, %r5, %r11, %r4;
	mul.lo.u32 %r11, %r11, 6;
	add.u32 %r11, %r11, %r3;
	mul.wide.u32 %rd6, %r11, 16;
	add.u64 %rd7, %rd0, %rd6;
	add.u32 %r7, %r7, %r9;
	st.global.v2.u32 [%rd7], {%r7, %r6};
	st.global.u32 [%rd7+8], %r5;
	ret;
}`

func TestDynamicSharedGlobalsAndDims(t *testing.T) {
	m := asm(t, dynSharedSrc)
	s := newSys(t, 2)
	const blocks, threads = 2 * 3, 6 // grid 2x1x3, block 3x2
	out := mustMalloc(t, s, 1, blocks*threads*16)
	must(t, s.Launch(Launch{Module: m, Entry: "dyns", GPUs: []int{1}, Grid: Dim3{2, 1, 3}, Block: Dim3{3, 2, 1}, SharedBytes: 64, Args: []any{out}}))
	got := readU32(t, s, out, blocks*threads*4)
	for b := 0; b < blocks; b++ {
		for th := 0; th < threads; th++ {
			w := got[(b*threads+th)*4:]
			want := []uint32{1 + 3*uint32(10*(th%4+1)), 64, uint32(b / 2)}
			for i, x := range want {
				if w[i] != x {
					t.Fatalf("block %d thread %d word %d: got %d want %d", b, th, i, w[i], x)
				}
			}
		}
	}
	// Touching past the dynamic size is out of bounds of the block's shared memory.
	err := s.Launch(Launch{Module: m, Entry: "dyns", Grid: D1(1), Block: Dim3{3, 2, 1}, SharedBytes: 16, Args: []any{mustMalloc(t, s, 0, 6*16)}})
	wantErr(t, err, KindOutOfBounds, "shared offset", "the block has 32 bytes of shared memory (0 static + 16 dynamic at 0x10)")
}

func TestHostMemoryAPI(t *testing.T) {
	s := newSys(t, 3)
	a := mustMalloc(t, s, 2, 100)
	must(t, WriteSlice(s, a, []uint16{1, 2, 3}))
	if v, _ := ReadSlice[uint16](s, a, 3); v[2] != 3 {
		t.Fatalf("round trip: %v", v)
	}
	if err := s.Write(a+98, []byte{1, 2, 3}); err == nil {
		t.Fatal("write past the end accepted")
	}
	sym, err := s.MallocSymmetric(64)
	must(t, err)
	must(t, s.Write(sym.Multicast(), []byte{7, 7, 7, 7}))
	for g := 0; g < 3; g++ {
		v := readU32(t, s, sym.On(g), 1)
		if v[0] != 0x07070707 {
			t.Fatalf("multicast host write did not reach GPU %d", g)
		}
	}
	p, err := s.Peer(sym.On(0)+8, 2)
	must(t, err)
	if p != sym.On(2)+8 {
		t.Fatalf("Peer: %#x", p)
	}
	if mc, err := s.MulticastOf(sym.On(1) + 4); err != nil || mc != sym.Multicast()+4 {
		t.Fatalf("MulticastOf: %#x %v", mc, err)
	}
	if _, err := s.Peer(a, 0); err == nil {
		t.Fatal("Peer of a private allocation on another GPU accepted")
	}
	must(t, s.Copy(a, sym.On(1), 4))
	must(t, s.Free(a))
	if err := s.Read(a, make([]byte, 4)); err == nil {
		t.Fatal("read after free accepted")
	}
	must(t, s.FreeSymmetric(sym))
	if err := s.Free(sym.On(0)); err == nil {
		t.Fatal("double free accepted")
	}
	if _, err := s.Malloc(3, 4); err == nil {
		t.Fatal("Malloc on a GPU that does not exist accepted")
	}
	if _, err := New(0); err == nil {
		t.Fatal("New(0) accepted")
	}
}

func TestUseAfterFreeInKernel(t *testing.T) {
	m := asm(t, oobSrc)
	s := newSys(t, 1)
	a := mustMalloc(t, s, 0, 256)
	must(t, s.Free(a))
	err := launch1(s, m, "oob", 1, 1, a, uint32(1))
	wantErr(t, err, KindOutOfBounds, "use after free")
	err = launch1(s, m, "oob", 1, 1, uint64(0), uint32(1))
	wantErr(t, err, KindBadAddress, "null pointer")
}
