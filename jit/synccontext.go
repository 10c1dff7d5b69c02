package jit

import (
	"context"
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/emu"
)

// ctxSynchronizer is a backend device or stream whose waits take a context (the emulator).
type ctxSynchronizer interface {
	synchronizeContext(ctx context.Context) error
}

// SynchronizeContext is Synchronize bounded by ctx: when ctx ends before the device's work
// does, it returns an error wrapping ctx's. On the emulator the wait itself ends; on GPUs
// cuCtxSynchronize cannot be abandoned, so it goes on in the background (a kernel that never
// ends keeps it, and the device, busy) and the caller is released.
func (d *Device) SynchronizeContext(ctx context.Context) error {
	if ctx == nil {
		return errors.New("jit: Device.SynchronizeContext: nil context")
	}
	if err := d.usable("Synchronize"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jit: Device.Synchronize: %w", err)
	}
	if cs, ok := d.impl.(ctxSynchronizer); ok {
		return cs.synchronizeContext(ctx)
	}
	return waitContext(ctx, "Device.Synchronize", d.impl.synchronize)
}

// SynchronizeContext is Stream.Synchronize bounded by ctx, as Device.SynchronizeContext.
func (s *Stream) SynchronizeContext(ctx context.Context) error {
	if s == nil {
		return errors.New("jit: SynchronizeContext of a nil *Stream")
	}
	if ctx == nil {
		return errors.New("jit: Stream.SynchronizeContext: nil context")
	}
	st, err := s.use("Stream.Synchronize")
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jit: Stream.Synchronize: %w", err)
	}
	if cs, ok := st.(ctxSynchronizer); ok {
		return cs.synchronizeContext(ctx)
	}
	return waitContext(ctx, "Stream.Synchronize", st.synchronize)
}

// waitContext runs the blocking wait f and returns its error, or ctx's once ctx ends first
// (f then finishes in the background).
func waitContext(ctx context.Context, what string, f func() error) error {
	if ctx.Done() == nil {
		return f()
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("jit: %s gave up waiting for the device (the wait goes on in the background): %w", what, ctx.Err())
	}
}

func (d *emuDevice) synchronizeContext(ctx context.Context) error {
	defer d.lock()()
	if err := d.syncAll(ctx, "Device.Synchronize"); err != nil {
		if ctx.Err() == nil {
			d.errSeen = true // the device's fault, reported here
		}
		return err
	}
	return nil
}

func (s *emuStream) synchronizeContext(ctx context.Context) error {
	if err := emuRefuseCaptured(s, "synchronize"); err != nil {
		return err
	}
	d := s.d
	defer d.lock()()
	if err := d.m.await(d, ctx, "Stream.Synchronize", s.q.empty); err != nil {
		return err
	}
	return d.sticky()
}

// checkDims checks a launch's grid g and block b against the GPU's per-dimension limits
// (the GPU backend otherwise gets CUDA_ERROR_INVALID_VALUE, naming nothing).
func checkDims(g, b Dim3) error {
	switch {
	case g.X > emu.MaxGridX || g.Y > emu.MaxGridYZ || g.Z > emu.MaxGridYZ:
		return fmt.Errorf("grid %dx%dx%d: a GPU allows at most %d blocks in x and %d in y and z", g.X, g.Y, g.Z, emu.MaxGridX, emu.MaxGridYZ)
	}
	return checkBlock(b)
}

// maxLaunchShared is the most dynamic shared memory a launch may ask for: the driver takes
// it as a 32-bit count (a larger one would be truncated); each GPU then has its own, lower,
// limit (the emulator's and sm_90's is emu.MaxSharedBytes).
const maxLaunchShared = 1<<32 - 1

// checkBlock checks a block shape, normalized and positive, against the GPU's limits: at
// most 1024 threads in x and y, 64 in z and 1024 in all. The extents are checked before
// their product, which cannot then overflow.
func checkBlock(b Dim3) error {
	switch {
	case b.X > 1024 || b.Y > 1024:
		return fmt.Errorf("block %dx%dx%d: a GPU allows at most 1024 threads in x and y (and 1024 in all)", b.X, b.Y, b.Z)
	case b.Z > 64:
		return fmt.Errorf("block %dx%dx%d: a GPU allows at most 64 threads in z", b.X, b.Y, b.Z)
	case b.X*b.Y*b.Z > 1024:
		return fmt.Errorf("block %dx%dx%d has %d threads; the limit is 1024", b.X, b.Y, b.Z, b.X*b.Y*b.Z)
	}
	return nil
}

// checkShared checks a launch's dynamic shared memory size.
func checkShared(n int) error {
	switch {
	case n < 0:
		return fmt.Errorf("negative dynamic shared memory %d", n)
	case n > maxLaunchShared:
		return fmt.Errorf("%d bytes of dynamic shared memory: a launch takes at most %d (a 32-bit count; a GPU has at most %d per block)", n, maxLaunchShared, emu.MaxSharedBytes)
	}
	return nil
}
