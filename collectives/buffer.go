package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/jit"
)

// Buffer is a symmetric buffer of n elements of one type on every GPU of a Comm (allocated
// in whole 16-byte units: the kernels move 128-bit vectors). A rank reads and writes its own
// GPU's copy.
type Buffer struct {
	c  *Comm
	s  *sym
	dt dsl.Type
	n  int
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

// maxElems is the most elements of dt (a supported type) a Buffer holds: the kernels index
// elements in 32 bits.
func maxElems(dt dsl.Type) int { return (math.MaxInt32 - 15) / dt.Bytes() }

// fits reports whether a Buffer can hold n elements of dt (a supported type): the
// *Algorithm queries answer "" for a count no Buffer holds (a huge n wrapped n*bytes and
// named the small-message kernel).
func fits(dt dsl.Type, n int) bool { return n >= 1 && n <= maxElems(dt) }

// Alloc allocates a symmetric buffer of n elements of dt on every GPU (collective). It is
// AllocContext with no deadline: it waits for every rank to call it.
func (c *Comm) Alloc(dt dsl.Type, n int) (*Buffer, error) {
	return c.AllocContext(context.Background(), dt, n)
}

// AllocContext is Alloc bounded by ctx: a rank that never calls in fails the wait when ctx
// ends (on the emulator, naming the ranks missing; on GPUs NVSHMEM's collective calls cannot
// be abandoned once entered, see jit.NVSHMEM.BarrierAllContext).
func (c *Comm) AllocContext(ctx context.Context, dt dsl.Type, n int) (*Buffer, error) {
	if c == nil {
		return nil, fmt.Errorf("collectives: Alloc: %w", errNilComm)
	}
	if c.r == nil {
		return nil, fmt.Errorf("collectives: Alloc: %w", errZeroComm)
	}
	if ctx == nil {
		return nil, errors.New("collectives: AllocContext: nil context")
	}
	if c.closed {
		return nil, errClosed
	}
	if !supported(dt) {
		name := dt.String()
		if dt == 0 {
			name = "(the zero Type)" // it prints as nothing
		}
		return nil, fmt.Errorf("collectives: element type %s is not supported (f32, f16, bf16, s32; e4m3 and e5m2 with multicast on sm_100a)", name)
	}
	if maxN := maxElems(dt); n < 1 || n > maxN {
		return nil, fmt.Errorf("collectives: %d elements of %s: want 1 to %d (the kernels index elements in 32 bits; a buffer holds at most 2 GiB)", n, dt, maxN)
	}
	s, err := c.alloc(ctx, n*dt.Bytes(), true)
	if err != nil {
		return nil, err
	}
	b := &Buffer{c: c, s: s, dt: dt, n: n}
	if c.bufs == nil {
		c.bufs = map[*jit.Memory]*Buffer{}
	}
	c.bufs[s.m] = b
	return b, nil
}

// Free releases the buffer's symmetric memory on every GPU (collective: every rank frees
// the same buffer at the same point, after the work that uses it; Free waits for the
// device first). The buffer must not be used afterwards: calls naming it fail. It is
// FreeContext with no deadline.
func (b *Buffer) Free() error { return b.FreeContext(context.Background()) }

// FreeContext is Free bounded by ctx: the wait for the device and the collective free fail
// when ctx ends first (see jit.Device.SynchronizeContext and jit.Memory.FreeContext for
// what a GPU cannot abandon). The buffer stays allocated when the wait for the device fails.
func (b *Buffer) FreeContext(ctx context.Context) error {
	if ctx == nil {
		return errors.New("collectives: Buffer.FreeContext: nil context")
	}
	if b == nil || b.c == nil {
		return errors.New("collectives: Free of a nil or freed Buffer")
	}
	c := b.c
	if c.closed {
		return errClosed
	}
	if err := c.r.Device.SynchronizeContext(ctx); err != nil {
		return fmt.Errorf("collectives: Free: %w", err)
	}
	var errs []error
	for _, m := range []*jit.Memory{b.s.m, b.s.tabm} {
		if m == nil {
			continue
		}
		if i := slices.Index(c.allocs, m); i >= 0 {
			c.allocs = slices.Delete(c.allocs, i, i+1)
		}
		errs = append(errs, m.FreeContext(ctx))
	}
	for k := range c.tmaps {
		if k.at == b.s.own {
			delete(c.tmaps, k)
		}
	}
	if c.ovl != nil {
		delete(c.ovl.peerA, b.s.own)
	}
	delete(c.bufs, b.s.m)
	b.c, b.s = nil, nil
	return errors.Join(errs...)
}

// Len returns the number of elements.
func (b *Buffer) Len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// DType returns the element type.
func (b *Buffer) DType() dsl.Type {
	if b == nil {
		return 0
	}
	return b.dt
}

// Bytes returns the size of the elements in bytes (without the 16-byte padding).
func (b *Buffer) Bytes() int {
	if b == nil {
		return 0
	}
	return b.n * b.dt.Bytes()
}

// DevPtr returns the address of this GPU's copy, for passing b to other kernels (a generated
// launcher takes jit.TypedPtr[float32](b.DevPtr()), or jit.AnyPtr); 0 once freed.
func (b *Buffer) DevPtr() jit.DevicePtr {
	if b == nil || b.s == nil || b.c.closed {
		return 0
	}
	return b.s.own
}

// Memory returns the symmetric allocation holding this GPU's copy (its first Bytes() bytes
// are the elements), for viewing b with jit.BufferOf (package ops/dist makes tensors of
// it); nil once freed or closed.
func (b *Buffer) Memory() *jit.Memory {
	if b == nil || b.s == nil || b.c.closed {
		return nil
	}
	return b.s.m
}

// BufferOf returns the live Buffer of this Comm whose copy on this GPU is m, or an error
// saying that m is none (the collectives need the Comm's symmetric memory: Alloc).
func (c *Comm) BufferOf(m *jit.Memory) (*Buffer, error) {
	if c == nil {
		return nil, fmt.Errorf("collectives: BufferOf: %w", errNilComm)
	}
	if c.r == nil {
		return nil, fmt.Errorf("collectives: BufferOf: %w", errZeroComm)
	}
	if c.closed {
		return nil, errClosed
	}
	if b, ok := c.bufs[m]; ok && m != nil {
		return b, nil
	}
	return nil, errors.New("collectives: the memory is no live Buffer of this Comm: collectives need the Comm's symmetric memory (Comm.Alloc)")
}

// live fails for a freed buffer, or one whose Comm is closed (Close frees its memory).
func (b *Buffer) live(what string) error {
	if b == nil {
		return fmt.Errorf("collectives: %s of a nil *Buffer", what)
	}
	if b.c == nil || b.s == nil {
		return fmt.Errorf("collectives: %s of a freed Buffer", what)
	}
	if b.c.closed {
		return fmt.Errorf("collectives: %s of a Buffer whose Comm is closed (Close frees it)", what)
	}
	return nil
}

// Write copies p (little-endian elements, at most Bytes()) to this GPU's copy.
func (b *Buffer) Write(p []byte) error {
	if err := b.live("Write"); err != nil {
		return err
	}
	if len(p) > b.Bytes() {
		return fmt.Errorf("collectives: %d bytes into a buffer of %d", len(p), b.Bytes())
	}
	return b.c.r.Device.CopyHtoD(b.s.own, p)
}

// Read copies this GPU's copy into p (at most Bytes()), after the device (and
// Options.Stream) has finished its work. It is ReadContext with no deadline.
func (b *Buffer) Read(p []byte) error { return b.ReadContext(context.Background(), p) }

// ReadContext is Read bounded by ctx: the wait for the device's work fails when ctx ends
// first (see jit.Device.SynchronizeContext).
func (b *Buffer) ReadContext(ctx context.Context, p []byte) error {
	if ctx == nil {
		return errors.New("collectives: Buffer.ReadContext: nil context")
	}
	if err := b.live("Read"); err != nil {
		return err
	}
	if len(p) > b.Bytes() {
		return fmt.Errorf("collectives: %d bytes from a buffer of %d", len(p), b.Bytes())
	}
	if st := b.c.o.Stream; st != nil {
		if err := st.SynchronizeContext(ctx); err != nil {
			return err
		}
	}
	if err := b.c.r.Device.SynchronizeContext(ctx); err != nil {
		return err
	}
	return b.c.r.Device.CopyDtoH(p, b.s.own)
}

// WriteF32 writes float32 values (converted to the buffer's type, rounding to nearest even;
// fp8 values out of range become NaN or Inf as cvt without .satfinite; for I32, NaN, ±Inf and
// values outside int32's range are an error naming the element) to this GPU's copy.
func (b *Buffer) WriteF32(v []float32) error {
	if err := b.live("WriteF32"); err != nil {
		return err
	}
	p := make([]byte, 0, len(v)*b.dt.Bytes())
	for i, x := range v {
		switch b.dt {
		case dsl.E4M3:
			e, _ := fp.F64ToE4M3(float64(x)) // out of range: the NaN bits, as documented
			p = append(p, e)
		case dsl.E5M2:
			e, _ := fp.F64ToE5M2(float64(x))
			p = append(p, e)
		case dsl.F32:
			p = binary.LittleEndian.AppendUint32(p, math.Float32bits(x))
		case dsl.I32:
			// Rounded as the other types are (the conversion truncated 1.5 to 1), and only
			// what int32 holds (3e9 and NaN became -2147483648).
			r := math.RoundToEven(float64(x))
			if !(r >= math.MinInt32 && r <= math.MaxInt32) {
				return fmt.Errorf("collectives: WriteF32: element %d (%v) is outside int32's range, the buffer's type", i, x)
			}
			p = binary.LittleEndian.AppendUint32(p, uint32(int32(r)))
		case dsl.F16:
			p = binary.LittleEndian.AppendUint16(p, fp.F32ToF16(x))
		case dsl.BF16:
			p = binary.LittleEndian.AppendUint16(p, fp.F32ToBF16(x))
		}
	}
	return b.Write(p)
}

// ReadF32 reads this GPU's copy, converted to float32.
func (b *Buffer) ReadF32() ([]float32, error) {
	if err := b.live("ReadF32"); err != nil {
		return nil, err
	}
	p := make([]byte, b.Bytes())
	if err := b.Read(p); err != nil {
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
	if b.c == nil {
		return fmt.Errorf("collectives: %s: the buffer was freed", what)
	}
	if b.c != c {
		return fmt.Errorf("collectives: %s: the buffer belongs to another Comm", what)
	}
	return nil
}
