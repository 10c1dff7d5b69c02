package jit

import (
	"errors"
	"fmt"
)

// Args is a kernel's argument list encoded once (Function.Encode) for launches that repeat
// it (Function.LaunchEncoded): the checks Launch makes of every argument (count, types,
// ranges, element types, devices) ran when it was made, so a launch re-checks only that the
// memory it names (a *Memory, a *Buffer, a TensorMap's buffer) was not freed since. The host
// path of a library that launches the same operands many times (ops) goes through it.
type Args struct {
	f     *Function
	words []uint64
	mems  []argMemory
}

// argMemory is the memory argument arg (0-based) names.
type argMemory struct {
	arg int
	m   interface{ isFreed() bool }
}

// Encode checks and encodes args for f as Launch does, for LaunchEncoded.
func (f *Function) Encode(args ...any) (*Args, error) {
	if f == nil || f.m == nil || f.sig == nil {
		return nil, errors.New("jit: Encode for a nil *Function (look kernels up with Module.Function)")
	}
	words, err := encodeArgs(f.sig, args, f.m.d, f.info)
	if err != nil {
		return nil, err
	}
	a := &Args{f: f, words: words}
	for i, v := range args {
		switch p := v.(type) {
		case TensorMap:
			a.mems = append(a.mems, argMemory{i, p.mem})
		case *TensorMap:
			a.mems = append(a.mems, argMemory{i, p.mem})
		case interface{ isFreed() bool }:
			a.mems = append(a.mems, argMemory{i, p})
		}
	}
	return a, nil
}

// LaunchEncoded launches f with arguments a encoded by f.Encode, as Launch does.
func (f *Function) LaunchEncoded(cfg LaunchConfig, a *Args) error {
	if f == nil || f.m == nil || f.sig == nil {
		return errors.New("jit: LaunchEncoded of a nil *Function (look kernels up with Module.Function)")
	}
	if a == nil {
		return fmt.Errorf("jit: launch of %s: the encoded arguments are nil (make them with this Function's Encode)", errName(f.sig.Name))
	}
	if a.f != f {
		return fmt.Errorf("jit: launch of %s: arguments encoded for another kernel (make them with this Function's Encode)", errName(f.sig.Name))
	}
	for _, m := range a.mems {
		if m.m.isFreed() {
			return fmt.Errorf("jit: launch of %s, argument %d (%s): its memory (the buffer, or the tensor map's) was freed after the arguments were encoded", errName(f.sig.Name), m.arg, errName(paramDecl(f.sig.Params[m.arg])))
		}
	}
	return f.launch(cfg, a.words)
}
