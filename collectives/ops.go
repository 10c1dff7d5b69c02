package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/kernels"
)

// Buffer is a symmetric buffer of n elements of one type on every GPU of a Comm (allocated
// in whole 16-byte units: the kernels move 128-bit vectors).
type Buffer struct {
	c   *Comm
	m   Mem
	tab Mem
	dt  dsl.Type
	n   int
}

// DTypes lists the element types every collective takes. fp8 (FP8DTypes) is narrower.
func DTypes() []dsl.Type { return []dsl.Type{dsl.F32, dsl.F16, dsl.BF16, dsl.I32} }

// FP8DTypes lists the fp8 element types: AllReduce and ReduceScatter of them need multicast
// on an sm_100a-class target (Options.Target sm_100a; the mm_*_fp8_* kernels, sums
// accumulating in f16), AllGather and Broadcast need multicast and whole 4-byte parts.
func FP8DTypes() []dsl.Type { return []dsl.Type{dsl.E4M3, dsl.E5M2} }

func supported(dt dsl.Type) bool {
	return slices.Contains(DTypes(), dt) || isFP8(dt)
}

func isFP8(dt dsl.Type) bool { return slices.Contains(FP8DTypes(), dt) }

// fp8Kernel returns the fp8 multimem kernel base (with its op suffix) for an fp8 reduction,
// or an error that names the dtype, what it needs and what is supported without it.
func (c *Comm) fp8Kernel(what, base string, dt dsl.Type, op Op) (string, error) {
	name := base + "fp8_" + kernels.OpName(op)
	spec, err := kernels.Lookup(name)
	if err != nil {
		return "", err
	}
	switch {
	case !slices.Contains(spec.Targets, c.o.Target):
		return "", fmt.Errorf("collectives: %s of %s needs multimem on an sm_100a-class target (%s), not %s; f32, f16, bf16 and s32 run everywhere", what, dt, spec.Targets[0], c.o.Target)
	case !c.mc:
		return "", fmt.Errorf("collectives: %s of %s needs multicast (NVLink SHARP), which is off (%v); f32, f16, bf16 and s32 run without it", what, dt, c.mcWhy)
	}
	return name, nil
}

// Alloc allocates a symmetric buffer of n elements of dt on every GPU (collective).
func (c *Comm) Alloc(dt dsl.Type, n int) (*Buffer, error) {
	if !supported(dt) {
		return nil, fmt.Errorf("collectives: element type %s is not supported (f32, f16, bf16, s32; e4m3 and e5m2 with multicast on sm_100a)", dt)
	}
	if n < 1 || n > math.MaxInt32/16 {
		return nil, fmt.Errorf("collectives: %d elements: want 1 to %d", n, math.MaxInt32/16)
	}
	m, err := c.alloc(n * dt.Bytes())
	if err != nil {
		return nil, err
	}
	t, err := c.table(m)
	if err != nil {
		return nil, err
	}
	return &Buffer{c: c, m: m, tab: t, dt: dt, n: n}, nil
}

// Len returns the number of elements.
func (b *Buffer) Len() int { return b.n }

// DType returns the element type.
func (b *Buffer) DType() dsl.Type { return b.dt }

// Bytes returns the size of the elements in bytes (without the 16-byte padding).
func (b *Buffer) Bytes() int { return b.n * b.dt.Bytes() }

// Write copies p (little-endian elements, at most Bytes()) to GPU gpu's copy.
func (b *Buffer) Write(gpu int, p []byte) error {
	if len(p) > b.Bytes() {
		return fmt.Errorf("collectives: %d bytes into a buffer of %d", len(p), b.Bytes())
	}
	return b.c.b.Write(b.m, gpu, 0, p)
}

// Read copies GPU gpu's copy into p (at most Bytes()).
func (b *Buffer) Read(gpu int, p []byte) error {
	if len(p) > b.Bytes() {
		return fmt.Errorf("collectives: %d bytes from a buffer of %d", len(p), b.Bytes())
	}
	return b.c.b.Read(b.m, gpu, 0, p)
}

// WriteF32 writes float32 values (converted to the buffer's type, rounding to nearest even;
// fp8 values out of range become NaN or Inf as cvt without .satfinite) to GPU gpu's copy.
func (b *Buffer) WriteF32(gpu int, v []float32) error {
	p := make([]byte, 0, len(v)*b.dt.Bytes())
	for _, x := range v {
		switch b.dt {
		case dsl.E4M3:
			e, _ := fp.F64ToE4M3(float64(x))
			p = append(p, e)
		case dsl.E5M2:
			e, _ := fp.F64ToE5M2(float64(x))
			p = append(p, e)
		case dsl.F32:
			p = binary.LittleEndian.AppendUint32(p, math.Float32bits(x))
		case dsl.I32:
			p = binary.LittleEndian.AppendUint32(p, uint32(int32(x)))
		case dsl.F16:
			p = binary.LittleEndian.AppendUint16(p, fp.F32ToF16(x))
		case dsl.BF16:
			p = binary.LittleEndian.AppendUint16(p, fp.F32ToBF16(x))
		}
	}
	return b.Write(gpu, p)
}

// ReadF32 reads GPU gpu's copy, converted to float32.
func (b *Buffer) ReadF32(gpu int) ([]float32, error) {
	p := make([]byte, b.Bytes())
	if err := b.Read(gpu, p); err != nil {
		return nil, err
	}
	out := make([]float32, b.n)
	for i := range out {
		switch b.dt {
		case dsl.E4M3:
			out[i] = float32(fp.E4M3ToF64(p[i]))
		case dsl.E5M2:
			out[i] = float32(fp.E5M2ToF64(p[i]))
		case dsl.F32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
		case dsl.I32:
			out[i] = float32(int32(binary.LittleEndian.Uint32(p[4*i:])))
		case dsl.F16:
			out[i] = fp.F16ToF32(binary.LittleEndian.Uint16(p[2*i:]))
		case dsl.BF16:
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(p[2*i:])) << 16)
		}
	}
	return out, nil
}

func (c *Comm) own(b *Buffer, what string) error {
	if b == nil {
		return fmt.Errorf("collectives: %s: nil buffer", what)
	}
	if b.c != c {
		return fmt.Errorf("collectives: %s: the buffer belongs to another Comm", what)
	}
	return nil
}

// mmReduces reports whether multimem reduces dt with op (.min/.max take no f32).
func mmReduces(dt dsl.Type, op Op) bool { return op == Sum || dt != dsl.F32 }

func checkOp(op Op) error {
	if kernels.OpName(op) == "" {
		return fmt.Errorf("collectives: reduction %v is not supported (Sum, Min, Max)", op)
	}
	return nil
}

// AllReduce reduces buf over every GPU with op, in place: afterwards every GPU's copy holds
// the reduction of all copies. See AllReduceTo for the algorithms.
func (c *Comm) AllReduce(ctx context.Context, buf *Buffer, op Op) error {
	return c.AllReduceTo(ctx, buf, buf, op)
}

// AllReduceAlgorithm returns the kernel AllReduceTo would run for n elements of dt.
//
// With multicast (NVLink SHARP): mm_allreduce_1shot up to OneShotMaxBytes, else
// mm_allreduce_2shot; f32 min and max have no multimem.ld_reduce form, so they run
// mm_allreduce_push (multicast stores, local reduction) up to OneShotMaxBytes and the
// peer-to-peer two-shot above. Without multicast: p2p_allreduce_lamport for floats up to
// LamportMaxBytes, then p2p_allreduce_1shot up to OneShotMaxBytes, then p2p_allreduce_2shot.
// fp8 (e4m3, e5m2) runs mm_allreduce_1shot_fp8 up to OneShotMaxBytes, else
// mm_allreduce_2shot_fp8, and has no algorithm ("") without multicast on sm_100a.
func (c *Comm) AllReduceAlgorithm(dt dsl.Type, op Op, n int) string {
	bytes := n * dt.Bytes()
	name := ""
	switch {
	case isFP8(dt):
		if _, err := c.fp8Kernel("AllReduce", "mm_allreduce_1shot_", dt, op); err != nil {
			return ""
		}
		name = "mm_allreduce_2shot_fp8_"
		if bytes <= c.o.OneShotMaxBytes {
			name = "mm_allreduce_1shot_fp8_"
		}
	case c.mc && mmReduces(dt, op) && bytes <= c.o.OneShotMaxBytes:
		name = "mm_allreduce_1shot_"
	case c.mc && mmReduces(dt, op):
		name = "mm_allreduce_2shot_"
	case c.mc && bytes <= c.o.OneShotMaxBytes:
		name = "mm_allreduce_push_"
	case !c.o.DisableLamport && dt.IsFloat() && bytes <= c.o.LamportMaxBytes:
		name = "p2p_allreduce_lamport_"
	case bytes <= c.o.OneShotMaxBytes:
		name = "p2p_allreduce_1shot_"
	case c.o.PushMinBytes > 0 && bytes >= c.o.PushMinBytes && n%(c.g*16/dt.Bytes()) == 0:
		return "p2p_reducescatter_" + kernels.OpName(op) + "+p2p_allgather"
	default:
		name = "p2p_allreduce_2shot_"
	}
	return name + kernels.OpName(op)
}

// AllReduceTo writes the reduction by op of every GPU's src into every GPU's dst (dst may
// be src). It picks the kernel by size, dtype and multicast availability
// (AllReduceAlgorithm) and logs the choice at debug level.
func (c *Comm) AllReduceTo(ctx context.Context, dst, src *Buffer, op Op) error {
	if err := errors.Join(c.own(dst, "AllReduce"), c.own(src, "AllReduce"), checkOp(op)); err != nil {
		return err
	}
	if dst.dt != src.dt || dst.n != src.n {
		return fmt.Errorf("collectives: AllReduce: dst holds %d %s, src %d %s", dst.n, dst.dt, src.n, src.dt)
	}
	dt, n := src.dt, src.n
	inPlace := dst == src
	if isFP8(dt) {
		if _, err := c.fp8Kernel("AllReduce", "mm_allreduce_1shot_", dt, op); err != nil {
			return err
		}
	}
	name := c.AllReduceAlgorithm(dt, op, n)
	if c.mc && !mmReduces(dt, op) {
		c.log.DebugContext(ctx, "collectives: multimem.ld_reduce has no f32 "+kernels.OpName(op)+"; using "+name)
	}
	vec := 16 / dt.Bytes()
	vectors := (n + vec - 1) / vec
	var attrs []any
	if c.debug(ctx) {
		attrs = []any{"elements", n, "bytes", n * dt.Bytes(), "in_place", inPlace}
	}
	if strings.HasSuffix(name, "+p2p_allgather") {
		// Push all-reduce: reduce-scatter by peer stores into a part buffer, then all-gather
		// of the parts by peer stores (stream order keeps the second after the first).
		part, err := c.partBuffer(dt, n/c.g)
		if err != nil {
			return err
		}
		if err := c.ReduceScatter(ctx, part, src, op); err != nil {
			return err
		}
		err = c.AllGather(ctx, dst, part)
		c.last = name
		return err
	}
	switch strings.Replace(name[:len(name)-len(kernels.OpName(op))], "_fp8_", "_", 1) {
	case "mm_allreduce_1shot_", "p2p_allreduce_1shot_":
		in, inTab := src.m, src.tab
		if inPlace {
			// Peers read this GPU's input while it writes its output: stage the input.
			if err := c.stage(src); err != nil {
				return err
			}
			in, inTab = c.scratch, c.scratchTab
		}
		if name[:3] == "mm_" {
			return c.launch(ctx, "all-reduce", name, dt, c.blocks(vectors), func(g int) []any {
				mc, _ := c.mcast(in, g)
				fmc, _ := c.mcast(c.flags, g)
				return []any{mc, c.addr(dst.m, g), fmc, c.addr(c.flags, g), uint32(g), uint32(c.g), uint32(n), c.flagEpoch}
			}, attrs...)
		}
		return c.launch(ctx, "all-reduce", name, dt, c.blocks(vectors), func(g int) []any {
			return []any{c.addr(inTab, g), c.addr(dst.m, g), c.addr(c.padTab, g), uint32(g), uint32(c.g), uint32(n), c.padEpoch}
		}, attrs...)
	case "mm_allreduce_2shot_":
		return c.launch(ctx, "all-reduce", name, dt, c.blocks((vectors+c.g-1)/c.g), func(g int) []any {
			in, _ := c.mcast(src.m, g)
			out, _ := c.mcast(dst.m, g)
			fmc, _ := c.mcast(c.flags, g)
			return []any{in, out, fmc, c.addr(c.flags, g), uint32(g), uint32(c.g), uint32(n), c.flagEpoch}
		}, attrs...)
	case "mm_allreduce_push_":
		ld := vectors * vec
		if err := c.ensureScratch(kernels.CollMaxGPUs * ld * dt.Bytes()); err != nil {
			return err
		}
		return c.launch(ctx, "all-reduce", name, dt, c.blocks(vectors), func(g int) []any {
			smc, _ := c.mcast(c.scratch, g)
			fmc, _ := c.mcast(c.flags, g)
			return []any{c.addr(src.m, g), c.addr(dst.m, g), smc, c.addr(c.scratch, g), fmc, c.addr(c.flags, g), uint32(g), uint32(c.g), uint32(n), c.flagEpoch}
		}, attrs...)
	case "p2p_allreduce_2shot_":
		return c.launch(ctx, "all-reduce", name, dt, c.blocks((vectors+c.g-1)/c.g), func(g int) []any {
			return []any{c.addr(src.tab, g), c.addr(dst.tab, g), c.addr(c.padTab, g), uint32(g), uint32(c.g), uint32(n), c.padEpoch}
		}, attrs...)
	}
	// Lamport: in place is safe (each thread reads its input before it writes its output,
	// and peers never read this GPU's input).
	l, err := c.lamportFor(dt)
	if err != nil {
		return err
	}
	epoch, nprev := l.epoch, l.nprev
	err = c.launch(ctx, "all-reduce", name, dt, c.blocks(vectors), func(g int) []any {
		return []any{c.addr(src.m, g), c.addr(dst.m, g), c.addr(l.tab, g), uint32(l.capacity), uint32(nprev), uint32(g), uint32(c.g), uint32(n), epoch}
	}, attrs...)
	if err != nil {
		return err
	}
	l.epoch++
	l.nprev = n
	return nil
}

// partBuffer returns the Comm's buffer of n elements of dt for the push all-reduce.
func (c *Comm) partBuffer(dt dsl.Type, n int) (*Buffer, error) {
	k := partKey{dt, n}
	if b, ok := c.parts[k]; ok {
		return b, nil
	}
	b, err := c.Alloc(dt, n)
	if err != nil {
		return nil, err
	}
	if c.parts == nil {
		c.parts = map[partKey]*Buffer{}
	}
	c.parts[k] = b
	return b, nil
}

// lamportFor returns (allocating and filling with -0.0 once) the Lamport buffer of dt's size.
func (c *Comm) lamportFor(dt dsl.Type) (*lamportState, error) {
	size := dt.Bytes()
	if l, ok := c.lamport[size]; ok {
		return l, nil
	}
	vec := 16 / size
	capacity := (c.o.LamportMaxBytes/size + vec - 1) / vec * vec
	elems := kernels.LamportSlots * kernels.CollMaxGPUs * capacity
	m, err := c.alloc(elems * size)
	if err != nil {
		return nil, err
	}
	fill := make([]byte, elems*size)
	for i := 0; i < len(fill); i += size {
		fill[i+size-1] = 0x80 // -0.0: only the sign bit
	}
	for _, g := range c.local {
		if err := c.b.Write(m, g, 0, fill); err != nil {
			return nil, err
		}
	}
	t, err := c.table(m)
	if err != nil {
		return nil, err
	}
	l := &lamportState{mem: m, tab: t, capacity: capacity}
	c.lamport[size] = l
	return l, nil
}

// ReduceScatter writes into every GPU r's dst the reduction by op over GPUs of part r of
// src (src holds NumGPUs parts of dst.Len() elements). With multicast (and a multimem form
// of op) it runs mm_reducescatter (ld_reduce of part r), else p2p_reducescatter (peer pushes
// into scratch, then a local reduction). dst and src are distinct buffers.
func (c *Comm) ReduceScatter(ctx context.Context, dst, src *Buffer, op Op) error {
	if err := errors.Join(c.own(dst, "ReduceScatter"), c.own(src, "ReduceScatter"), checkOp(op)); err != nil {
		return err
	}
	if dst == src || dst.dt != src.dt || src.n != dst.n*c.g {
		return fmt.Errorf("collectives: ReduceScatter: src must hold %d parts of dst's %d %s in another buffer (dst %d %s, src %d %s)", c.g, dst.n, dst.dt, dst.n, dst.dt, src.n, src.dt)
	}
	dt, m := dst.dt, dst.n
	vec := 16 / dt.Bytes()
	blocks := c.blocks((m + vec - 1) / vec)
	var attrs []any
	if c.debug(ctx) {
		attrs = []any{"elements", m, "bytes", m * dt.Bytes()}
	}
	name := "mm_reducescatter_" + kernels.OpName(op)
	if isFP8(dt) {
		var err error
		if name, err = c.fp8Kernel("ReduceScatter", "mm_reducescatter_", dt, op); err != nil {
			return err
		}
	}
	if c.mc && mmReduces(dt, op) {
		return c.launch(ctx, "reduce-scatter", name, dt, blocks, func(g int) []any {
			in, _ := c.mcast(src.m, g)
			fmc, _ := c.mcast(c.flags, g)
			return []any{in, c.addr(dst.m, g), fmc, c.addr(c.flags, g), uint32(g), uint32(c.g), uint32(m), c.flagEpoch}
		}, attrs...)
	}
	if err := c.ensureScratch(kernels.CollMaxGPUs * m * dt.Bytes()); err != nil {
		return err
	}
	return c.launch(ctx, "reduce-scatter", "p2p_reducescatter_"+kernels.OpName(op), dt, blocks, func(g int) []any {
		return []any{c.addr(src.m, g), c.addr(dst.m, g), c.addr(c.scratchTab, g), c.addr(c.padTab, g), uint32(g), uint32(c.g), uint32(m), c.padEpoch}
	}, attrs...)
}

// AllGather writes every GPU r's src into part r of every GPU's dst (dst holds NumGPUs parts
// of src.Len() elements). With multicast, and a part size that is a multiple of 4 bytes, it
// runs mm_allgather (multimem.st of 32-bit words), else p2p_allgather (peer stores).
func (c *Comm) AllGather(ctx context.Context, dst, src *Buffer) error {
	if err := errors.Join(c.own(dst, "AllGather"), c.own(src, "AllGather")); err != nil {
		return err
	}
	if dst == src || dst.dt != src.dt || dst.n != src.n*c.g {
		return fmt.Errorf("collectives: AllGather: dst must hold %d parts of src's %d %s in another buffer (dst %d %s)", c.g, src.n, src.dt, dst.n, dst.dt)
	}
	dt, n := src.dt, src.n
	bytes := n * dt.Bytes()
	var attrs []any
	if c.debug(ctx) {
		attrs = []any{"elements", n, "bytes", bytes}
	}
	if c.mc && bytes%4 == 0 {
		words := bytes / 4
		return c.launch(ctx, "all-gather", "mm_allgather", dsl.F32, c.blocks((words+3)/4), func(g int) []any {
			out, _ := c.mcast(dst.m, g)
			fmc, _ := c.mcast(c.flags, g)
			return []any{c.addr(src.m, g), out, fmc, c.addr(c.flags, g), uint32(g), uint32(c.g), uint32(words), c.flagEpoch}
		}, attrs...)
	}
	if isFP8(dt) {
		return fmt.Errorf("collectives: AllGather of %s needs multicast and parts of a multiple of 4 bytes (%d bytes, multicast %v); f32, f16, bf16 and s32 run everywhere", dt, bytes, c.mc)
	}
	if c.mc {
		c.log.DebugContext(ctx, "collectives: all-gather part is not a multiple of 4 bytes; using peer stores", "bytes", bytes)
	}
	vec := 16 / dt.Bytes()
	return c.launch(ctx, "all-gather", "p2p_allgather", dt, c.blocks((n+vec-1)/vec), func(g int) []any {
		return []any{c.addr(src.m, g), c.addr(dst.tab, g), c.addr(c.padTab, g), uint32(g), uint32(c.g), uint32(n), c.padEpoch}
	}, attrs...)
}

// Broadcast writes GPU root's src into every GPU's dst (dst may be src). With multicast it
// runs mm_broadcast (multimem.st of 32-bit words) when the size allows, else p2p_broadcast.
func (c *Comm) Broadcast(ctx context.Context, dst, src *Buffer, root int) error {
	if err := errors.Join(c.own(dst, "Broadcast"), c.own(src, "Broadcast")); err != nil {
		return err
	}
	if dst.dt != src.dt || dst.n != src.n {
		return fmt.Errorf("collectives: Broadcast: dst holds %d %s, src %d %s", dst.n, dst.dt, src.n, src.dt)
	}
	if root < 0 || root >= c.g {
		return fmt.Errorf("collectives: Broadcast: root %d out of range (%d GPUs)", root, c.g)
	}
	dt, n := src.dt, src.n
	bytes := n * dt.Bytes()
	var attrs []any
	if c.debug(ctx) {
		attrs = []any{"elements", n, "bytes", bytes, "root", root}
	}
	if c.mc && bytes%4 == 0 {
		words := bytes / 4
		return c.launch(ctx, "broadcast", "mm_broadcast", dsl.F32, c.blocks((words+3)/4), func(g int) []any {
			out, _ := c.mcast(dst.m, g)
			fmc, _ := c.mcast(c.flags, g)
			return []any{c.addr(src.m, g), out, fmc, c.addr(c.flags, g), uint32(root), uint32(g), uint32(c.g), uint32(words), c.flagEpoch}
		}, attrs...)
	}
	if isFP8(dt) {
		return fmt.Errorf("collectives: Broadcast of %s needs multicast and a multiple of 4 bytes (%d bytes, multicast %v); f32, f16, bf16 and s32 run everywhere", dt, bytes, c.mc)
	}
	vec := 16 / dt.Bytes()
	return c.launch(ctx, "broadcast", "p2p_broadcast", dt, c.blocks((n+vec-1)/vec), func(g int) []any {
		return []any{c.addr(src.m, g), c.addr(dst.tab, g), c.addr(c.padTab, g), uint32(root), uint32(g), uint32(c.g), uint32(n), c.padEpoch}
	}, attrs...)
}

// Barrier returns once every GPU of the group has reached it (mm_barrier with multicast,
// else p2p_barrier). Like every collective here it is a kernel: it orders the GPUs' work
// that precedes and follows it on their streams.
func (c *Comm) Barrier(ctx context.Context) error {
	if c.mc {
		return c.launch(ctx, "barrier", "mm_barrier", dsl.U32, 1, func(g int) []any {
			fmc, _ := c.mcast(c.flags, g)
			return []any{fmc, c.addr(c.flags, g), uint32(c.g), c.flagEpoch}
		})
	}
	return c.launch(ctx, "barrier", "p2p_barrier", dsl.U32, 1, func(g int) []any {
		return []any{c.addr(c.padTab, g), uint32(g), uint32(c.g), c.padEpoch}
	})
}

// Addr returns the device address of GPU gpu's copy of b, for passing b to other kernels
// (for example a generated launcher, as jit.DevicePtr(addr)).
func (b *Buffer) Addr(gpu int) (uint64, error) {
	if err := b.c.own(b, "Addr"); err != nil {
		return 0, err
	}
	return b.c.b.Addr(b.m, gpu, gpu)
}
