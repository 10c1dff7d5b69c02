package jit_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// Positional launches check what LaunchArgs checks: every typed pointer's element type and
// every scalar's type against what the kernel declared, and every integer's range against
// the parameter's type; the errors name the parameter.
func TestLaunchPositionalChecksTypes(t *testing.T) {
	d, fn := loadScale(t, dsl.F16, true)
	const n = 4
	x, _ := jit.Alloc[fp.F16](d, n)
	y, _ := jit.Alloc[fp.F16](d, n)
	f32, _ := jit.Alloc[float32](d, n)
	cfg := jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(32)}
	if err := fn.Launch(cfg, x, y, float32(2), uint32(n)); err != nil {
		t.Fatalf("a good launch: %v", err)
	}
	if err := fn.Launch(cfg, x.Ptr(), jit.AnyOf[fp.F16](y), float32(2), uint32(n)); err != nil {
		t.Fatalf("a good launch through TypedPtr and AnyPtr: %v", err)
	}
	for _, c := range []struct {
		name string
		args []any
		want string
	}{
		{"f32 buffer for f16", []any{f32, y, float32(2), uint32(n)}, "argument 0 (.u64 x): got a pointer to f32 (*jit.Buffer[float32]), but the kernel's parameter points to f16"},
		{"f32 TypedPtr for f16", []any{x, f32.Ptr(), float32(2), uint32(n)}, "argument 1 (.u64 y): got a pointer to f32"},
		{"bf16 AnyPtr for f16", []any{x, jit.AnyPtr{Addr: y.DevPtr(), Elem: ptx.BF16}, float32(2), uint32(n)}, "argument 1 (.u64 y): got an AnyPtr to bf16, but the kernel's parameter points to f16"},
		{"negative count", []any{x, y, float32(2), int32(-1)}, "argument 3 (.u32 n): got int32 -1: out of range for a .u32 parameter (0 to 4294967295)"},
		{"pointer for a scalar", []any{x, y, x, uint32(n)}, "argument 2"},
		{"scalar for a pointer", []any{uint64(8), y, float32(2), uint32(n)}, "argument 0 (.u64 x): got uint64, but the kernel's parameter is a pointer to f16"},
		{"f16 for the f32 scale", []any{x, y, fp.F16Of(2), uint32(n)}, "argument 2"},
	} {
		err := fn.Launch(cfg, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one holding %q", c.name, err, c.want)
		}
	}
	// Without declared parameters, the range is still checked against the PTX type.
	// (its own device's buffers: a launch refuses another device's.)
	db, bare := loadScale(t, dsl.F16, false)
	xb, _ := jit.Alloc[fp.F16](db, n)
	yb, _ := jit.Alloc[fp.F16](db, n)
	if err := bare.Launch(cfg, xb, yb, float32(2), int32(-1)); err == nil || !strings.Contains(err.Error(), "argument 3 (.u32 n): got int32 -1: out of range") {
		t.Errorf("int32(-1) for .u32 without Source.Params: %v", err)
	}
}

// EncodeArgs checks ranges per the parameter's kind: unsigned refuses negatives, signed
// refuses unsigned values above its maximum, bit types take any bits.
func TestEncodeArgsRanges(t *testing.T) {
	f := &ptx.Func{Name: "k", Params: []ptx.Param{{Name: "s", Type: ptx.S32}, {Name: "u", Type: ptx.U16}, {Name: "b", Type: ptx.B32}, {Name: "l", Type: ptx.S64}}}
	if _, err := jit.EncodeArgs(f, []any{int32(-1), uint16(65535), int32(-1), int64(-5)}); err != nil {
		t.Fatalf("in range: %v", err)
	}
	if _, err := jit.EncodeArgs(f, []any{uint32(1 << 31), uint16(1), uint32(1), int64(1)}); err == nil || !strings.Contains(err.Error(), "argument 0 (.s32 s): got uint32 2147483648: out of range for a .s32 parameter (-2147483648 to 2147483647)") {
		t.Errorf("uint32 2^31 for .s32: %v", err)
	}
	if _, err := jit.EncodeArgs(f, []any{int32(1), int16(-2), uint32(1), int64(1)}); err == nil || !strings.Contains(err.Error(), "argument 1 (.u16 u): got int16 -2: out of range for a .u16 parameter (0 to 65535)") {
		t.Errorf("int16 -2 for .u16: %v", err)
	}
	if _, err := jit.EncodeArgs(f, []any{int32(1), uint16(1), uint32(1), uint64(1 << 63)}); err == nil || !strings.Contains(err.Error(), "out of range for a .s64 parameter (-9223372036854775808 to 9223372036854775807)") {
		t.Errorf("uint64 2^63 for .s64: %v", err)
	}
}

// LaunchArgs checks a scalar field's value against the parameter's range too: a negative
// int32 field for a .u32 parameter was masked to 2^32-1.
func TestLaunchArgsRanges(t *testing.T) {
	d, fn := loadScale(t, dsl.F32, false)
	x, _ := jit.Alloc[float32](d, 4)
	type signedN struct {
		X, Y  jit.Ptr[float32]
		Alpha float32
		N     int32
	}
	cfg := jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(32)}
	err := fn.LaunchArgs(cfg, signedN{X: x, Y: x, Alpha: 1, N: -1})
	if err == nil || !strings.Contains(err.Error(), "field N (parameter n): s32 -1: out of range for a .u32 parameter") {
		t.Errorf("N: -1 for .u32: %v", err)
	}
	if err := fn.LaunchArgs(cfg, signedN{X: x, Y: x, Alpha: 1, N: 4}); err != nil {
		t.Errorf("N: 4: %v", err)
	}
}
