//go:build cuda

package dsl_test

import (
	"encoding/binary"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
)

// TestGPUHopperGemmTile runs the emulator's warp-specialized tiles (TMA through the mbarrier
// pipeline into wgmma, tensor maps from jit.NewTensorMap) on GPU 0 (sm_90) and checks them
// against the same reference.
func TestGPUHopperGemmTile(t *testing.T) {
	d, err := jit.OpenBackend(jit.GPU, 0)
	if err != nil {
		if os.Getenv("KGEN_REQUIRE_GPU") == "1" || (!strings.Contains(err.Error(), "no CUDA driver") && !strings.Contains(err.Error(), "cuInit failed") && !strings.Contains(err.Error(), "no GPU")) {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	defer d.Close()
	if d.Info().SM != 90 {
		t.Skipf("%s is %s; wgmma needs sm_90a", d.Info().Name, d.Info().Arch)
	}
	for _, c := range hopperTiles {
		t.Run(c.String(), func(t *testing.T) { c.runGPU(t, d) })
	}
}

func (c hopperTile) runGPU(t *testing.T, d *jit.Device) {
	k, atom, cA, cB := c.build(t)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	mod, err := d.Load(jit.Source{Module: m})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	f, err := mod.Function("wsgemm")
	if err != nil {
		t.Fatal(err)
	}
	data := c.data()
	rows := c.m()
	tmap := func(raw []byte, rows int, cp *dsl.TMACopy) jit.TensorMap {
		dims := c.mapDims(t, cp, rows, cp == cB)
		box := []uint32{uint32(cp.Box[0]), uint32(cp.Box[1])}
		strides := []uint64{dims[0] * uint64(data.es)}
		var tm jit.TensorMap
		if data.es == 4 {
			h := make([]float32, len(raw)/4)
			for i := range h {
				h[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			buf, err := jit.Alloc[float32](d, len(h))
			if err == nil {
				err = buf.CopyFromHost(h)
			}
			if err == nil {
				tm, err = jit.NewTensorMap(buf, dims[:], strides, box, jit.Swizzle(cp.SwizzleBytes))
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { buf.Free() })
			return tm
		}
		if data.es == 2 {
			h := make([]uint16, len(raw)/2)
			for i := range h {
				h[i] = binary.LittleEndian.Uint16(raw[2*i:])
			}
			buf, err := jit.Alloc[uint16](d, len(h))
			if err == nil {
				err = buf.CopyFromHost(h)
			}
			if err == nil {
				tm, err = jit.NewTensorMap(buf, dims[:], strides, box, jit.Swizzle(cp.SwizzleBytes))
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { buf.Free() })
			return tm
		}
		buf, err := jit.Alloc[uint8](d, len(raw))
		if err == nil {
			err = buf.CopyFromHost(raw)
		}
		if err == nil {
			tm, err = jit.NewTensorMap(buf, dims[:], strides, box, jit.Swizzle(cp.SwizzleBytes))
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { buf.Free() })
		return tm
	}
	out, err := jit.Alloc[float32](d, rows*c.n)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Free()
	if err := f.Launch(jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(128 + 2*rows)}, tmap(data.ab, rows, cA), tmap(data.bb, c.n, cB), out); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, rows*c.n)
	if err := out.CopyToHost(got); err != nil {
		t.Fatal(err)
	}
	c.check(t, atom, data, got)
}
