package jit

import (
	"errors"
	"fmt"
)

// Stream memory operations: a stream that waits on a 32-bit word of device memory, and one
// that writes such a word (CUDA's cuStreamWaitValue32 / cuStreamWriteValue32). With them a
// kernel still running on one stream can release work queued on another stream piece by
// piece (a persistent GEMM bumps a per-piece counter; a side stream waits for each counter
// and copies the piece with the copy engines), which events cannot: an event completes only
// when the whole kernel does.

// WaitCond is the condition a Stream.WaitValue32 waits for (CUDA's CU_STREAM_WAIT_VALUE_*).
type WaitCond uint8

const (
	// WaitGEQ waits until int32(*addr - value) >= 0: a cyclic greater-or-equal, so a counter
	// that wraps around 2^32 still compares right while it stays within 2^31 of value.
	WaitGEQ WaitCond = iota
	// WaitEQ waits until *addr == value.
	WaitEQ
	// WaitAND waits until *addr & value != 0.
	WaitAND
	// WaitNOR waits until ^(*addr | value) != 0. On GPUs it needs the device attribute
	// CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR; WaitValue32 says so when it is off.
	WaitNOR
)

func (c WaitCond) String() string {
	switch c {
	case WaitGEQ:
		return "GEQ"
	case WaitEQ:
		return "EQ"
	case WaitAND:
		return "AND"
	case WaitNOR:
		return "NOR"
	}
	return fmt.Sprintf("WaitCond(%d)", uint8(c))
}

// holds reports whether the 32-bit word v satisfies c against value.
func (c WaitCond) holds(v, value uint32) bool {
	switch c {
	case WaitGEQ:
		return int32(v-value) >= 0
	case WaitEQ:
		return v == value
	case WaitAND:
		return v&value != 0
	case WaitNOR:
		return ^(v | value) != 0
	}
	return false
}

// describe says what a wait for c against value waits for ("the word to reach 5").
func (c WaitCond) describe(value uint32) string {
	switch c {
	case WaitGEQ:
		return fmt.Sprintf(">= %d (cyclic)", value)
	case WaitEQ:
		return fmt.Sprintf("== %d", value)
	case WaitAND:
		return fmt.Sprintf("& %#x != 0", value)
	case WaitNOR:
		return fmt.Sprintf("^(x | %#x) != 0", value)
	}
	return c.String()
}

// checkValueAddr checks a stream memory operation's address: non-zero and 4-byte aligned, as
// the driver requires.
func checkValueAddr(op string, addr DevicePtr) error {
	if addr == 0 {
		return fmt.Errorf("jit: %s: the address is 0", op)
	}
	if addr%4 != 0 {
		return fmt.Errorf("jit: %s: the address %#x is not 4-byte aligned", op, uint64(addr))
	}
	return nil
}

// WaitValue32 makes the work enqueued on s after this call wait until the 32-bit word at addr
// satisfies cond against value (cuStreamWaitValue32). It does not block the host. The word is
// read as the copy engines and the stream's later work see device memory: the wait acts as an
// acquire at system scope, so it pairs with a kernel's release (st.release.sys, atom or red
// with .release, or a fence.sc/fence.acq_rel.sys before a relaxed store) of the word, and the
// stores the kernel ordered before that release are visible to the work after the wait.
//
// A wait that is never satisfied holds the stream for ever, as on a GPU: bound the host's wait
// with SynchronizeContext; the emulator reports a wait nothing can satisfy as a deadlock. CUDA
// does not see the dependency either: work that the waiter needs must not be queued behind the
// wait on the same stream (or on the legacy default stream, which waits for every stream).
// Graph capture records it (on the GPU; the emulator captures kernel launches only).
func (s *Stream) WaitValue32(addr DevicePtr, value uint32, cond WaitCond) error {
	if s == nil {
		return errors.New("jit: WaitValue32 on a nil *Stream (the default stream would wait for every stream: use a stream from Device.NewStream)")
	}
	if cond > WaitNOR {
		return fmt.Errorf("jit: Stream.WaitValue32: unknown condition %v", cond)
	}
	if err := checkValueAddr("Stream.WaitValue32", addr); err != nil {
		return err
	}
	st, err := s.use("Stream.WaitValue32")
	if err != nil {
		return err
	}
	return st.waitValue32(addr, value, cond)
}

// WriteValue32 enqueues a write of value to the 32-bit word at addr (cuStreamWriteValue32)
// once the stream's earlier work is done. The write is a release: the stream's earlier work
// (kernels, copies) is visible to whoever acquires the word (a kernel's ld.acquire.sys or
// another stream's WaitValue32). Graph capture records it on the GPU.
func (s *Stream) WriteValue32(addr DevicePtr, value uint32) error {
	if s == nil {
		return errors.New("jit: WriteValue32 on a nil *Stream")
	}
	if err := checkValueAddr("Stream.WriteValue32", addr); err != nil {
		return err
	}
	st, err := s.use("Stream.WriteValue32")
	if err != nil {
		return err
	}
	return st.writeValue32(addr, value)
}
