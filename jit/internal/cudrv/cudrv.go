//go:build cuda && cgo && linux && amd64

// This file loads the CUDA driver (libcuda.so.1) at run time instead of linking it, so a
// binary built with -tags cuda starts, and reports a clear error, on a machine without a
// driver or without a GPU. cudrv_linux_amd64.c defines every entry point of CUDA 12's cuda.h
// (syms.h) as a trampoline into the dlopen'ed driver; gorgonia.org/cu's calls land there.

package cudrv

// #cgo LDFLAGS: -ldl
// int kgen_cu_status(int *code, const char **msg, const char **path);
import "C"

import "fmt"

// Loaded reports that this build loads the driver itself (linux/amd64).
const Loaded = true

// Err says whether the CUDA driver can be used: nil when libcuda.so.1 loaded and cuInit(0)
// succeeded, otherwise an error that says what is missing and what to do.
func Err() error {
	var code C.int
	var msg, path *C.char
	switch C.kgen_cu_status(&code, &msg, &path) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("no CUDA driver: libcuda.so.1 could not be loaded (%s); run on a machine with an NVIDIA driver, or build without -tags cuda to use the emulator", C.GoString(msg))
	case 2:
		hint := "check nvidia-smi"
		switch int(code) {
		case 100:
			hint = "no CUDA-capable GPU is visible (check CUDA_VISIBLE_DEVICES and nvidia-smi)"
		case 35:
			hint = "the driver is older than CUDA 12.x needs; update the NVIDIA driver"
		case 34:
			hint = "libcuda.so.1 is a stub, not the real driver; put the driver's library first on the loader path"
		}
		return fmt.Errorf("CUDA driver %s: cuInit failed with CUresult %d: %s", C.GoString(path), int(code), hint)
	}
	return fmt.Errorf("CUDA driver: cuInit was never called (gorgonia.org/cu not initialised)")
}

// Path returns the file the driver was loaded from ("" when none).
func Path() string {
	var code C.int
	var msg, path *C.char
	C.kgen_cu_status(&code, &msg, &path)
	return C.GoString(path)
}
