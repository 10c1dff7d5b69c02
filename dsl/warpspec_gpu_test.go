//go:build cuda

package dsl_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// openHopper opens GPU 0 if it is an sm_90 part, else skips (fails with KGEN_REQUIRE_GPU=1
// when there is no GPU).
func openHopper(t *testing.T) *jit.Device {
	t.Helper()
	d, err := jit.OpenBackend(jit.GPU, 0)
	if err != nil {
		if os.Getenv("KGEN_REQUIRE_GPU") == "1" || (!strings.Contains(err.Error(), "no CUDA driver") && !strings.Contains(err.Error(), "cuInit failed") && !strings.Contains(err.Error(), "no GPU")) {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if d.Info().SM != 90 {
		d.Close()
		t.Skipf("%s is %s; wgmma needs sm_90a", d.Info().Name, d.Info().Arch)
	}
	return d
}

// gpuBF16 copies bf16 bytes to a new device buffer.
func gpuBF16(t *testing.T, d *jit.Device, raw []byte) *jit.Buffer[uint16] {
	t.Helper()
	h := make([]uint16, len(raw)/2)
	for i := range h {
		h[i] = binary.LittleEndian.Uint16(raw[2*i:])
	}
	buf, err := jit.Alloc[uint16](d, len(h))
	if err == nil {
		err = buf.CopyFromHost(h)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Free() })
	return buf
}

// gpuFunction builds k and loads its entry on d.
func gpuFunction(t *testing.T, d *jit.Device, k *dsl.Kernel, entry string) *jit.Function {
	t.Helper()
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	mod, err := d.Load(jit.Source{Module: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close() })
	f, err := mod.Function(entry)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestGPUGemmRSChain runs TestGemmRSChain's chains (RS wgmma, AccToA, AccView's row
// reductions) on GPU 0 against the same reference.
func TestGPUGemmRSChain(t *testing.T) {
	d := openHopper(t)
	defer d.Close()
	for _, c := range attnChains {
		t.Run(c.String(), func(t *testing.T) {
			f := gpuFunction(t, d, c.build(t), "chain")
			qf, kf, vf, in := c.inputs()
			out, err := jit.Alloc[float32](d, 64*c.d)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Free()
			ml, err := jit.Alloc[float32](d, 4*128)
			if err != nil {
				t.Fatal(err)
			}
			defer ml.Free()
			if err := f.Launch(jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(128)},
				gpuBF16(t, d, in[0]), gpuBF16(t, d, in[1]), gpuBF16(t, d, in[2]), out, ml); err != nil {
				t.Fatal(err)
			}
			got, stats := make([]float32, 64*c.d), make([]float32, 4*128)
			if err := out.CopyToHost(got); err != nil {
				t.Fatal(err)
			}
			if err := ml.CopyToHost(stats); err != nil {
				t.Fatal(err)
			}
			c.check(t, qf, kf, vf, got, stats)
		})
	}
}

// TestGPUWarpSpecializedAttention runs attentionKernel on GPU 0 against the float64
// softmax attention.
func TestGPUWarpSpecializedAttention(t *testing.T) {
	d := openHopper(t)
	defer d.Close()
	for _, kvLen := range []int{64, 256, 1024} {
		t.Run(fmt.Sprint("kv", kvLen), func(t *testing.T) {
			k := dsl.New("attn", dsl.WithTarget(ptx.SM90a))
			attentionKernel(k, kvLen)
			f := gpuFunction(t, d, k, "attn")
			data := newAttnData(kvLen)
			tmap := func(raw []byte, rows int) jit.TensorMap {
				tm, err := jit.NewTensorMap(gpuBF16(t, d, raw), []uint64{attnD, uint64(rows)}, []uint64{2 * attnD}, []uint32{64, 64}, jit.Swizzle(128))
				if err != nil {
					t.Fatal(err)
				}
				return tm
			}
			out, err := jit.Alloc[float32](d, 64*attnD)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Free()
			if err := f.Launch(jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(256)},
				tmap(data.qb, 64), tmap(data.kb, kvLen), tmap(data.vb, kvLen), out); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, 64*attnD)
			if err := out.CopyToHost(got); err != nil {
				t.Fatal(err)
			}
			data.check(t, got)
		})
	}
}
