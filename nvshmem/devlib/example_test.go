package devlib_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/kgen-dev/kgen/nvshmem/devlib"
	"github.com/kgen-dev/kgen/ptx"
)

func ExamplePlanTarget() {
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90, ptx.SM90a, ptx.SM100a, "sm_60"} {
		p, err := devlib.PlanTarget(target)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(target, "->", strings.Join(p.LLCArgs(), " "))
	}
	// Output:
	// sm_80 -> -march=nvptx64 -mcpu=sm_80 -mattr=+ptx80
	// sm_90 -> -march=nvptx64 -mcpu=sm_90 -mattr=+ptx80
	// sm_90a -> -march=nvptx64 -mcpu=sm_90 -mattr=+ptx80
	// sm_100a -> -march=nvptx64 -mcpu=sm_90 -mattr=+ptx80
	// devlib: unsupported target "sm_60": NVSHMEM needs sm_70 or newer (want sm_XX with XX >= 70, optionally with an a or f suffix: sm_80, sm_90, sm_90a, sm_100a)
}

// The ABI check needs no tools when it reads the generated API list.
func ExampleCheckDecls() {
	f, err := os.Open("testdata/api_3.4.5.txt")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	lib, err := devlib.ReadSignatures(f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(lib["nvshmemx_putmem_signal_nbi_block"].Decl())

	kernel := []byte(`
.extern .func nvshmemx_putmem_block(.param .b64 dest, .param .b64 src, .param .b64 nbytes, .param .b32 pe);
.extern .func (.param .b32 ret) nvshmem_ptr(.param .b64 dest, .param .b32 pe);
`)
	decls, err := devlib.ParseDecls(kernel)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(devlib.CheckDecls(decls, lib, "3.4.5"))
	// Output:
	// .extern .func nvshmemx_putmem_signal_nbi_block(.param .b64 p0, .param .b64 p1, .param .b64 p2, .param .b64 p3, .param .b64 p4, .param .b32 p5, .param .b32 p6);
	// devlib: 1 declaration(s) disagree with NVSHMEM 3.4.5:
	// 	nvshmem_ptr: returns .b64, declared .b32 (library: .extern .func (.param .b64 ret) nvshmem_ptr(.param .b64 p0, .param .b32 p1);)
}

func ExampleCheckVersion() {
	fmt.Println(devlib.CheckVersion("3.4.5", "3.4.5"))
	fmt.Println(devlib.CheckVersion("3.4.5", "3.5.0"))
	// Output:
	// <nil>
	// devlib: the device library was built from NVSHMEM 3.4.5 but NVSHMEM 3.5.0 is in use; the device state layout differs between versions, so rebuild it from 3.5.0's libnvshmem_device.bc (kgen devlib, with NVSHMEM_HOME pointing at that installation)
}

// Building needs LLVM 19 and NVSHMEM (scripts/tools.sh provisions both), so this example is
// compiled but not run.
func ExampleLibrary_Build() {
	lib, err := devlib.Open("") // $NVSHMEM_HOME or the project's tool folder
	if err != nil {
		log.Fatal(err)
	}
	res, err := lib.Build(context.Background(), ptx.SM90, []string{"nvshmemx_putmem_block", "nvshmem_quiet"})
	if err != nil {
		log.Fatal(err)
	}
	// Link the kernel PTX, then res.PTX, then res.Archive (as CU_JIT_INPUT_LIBRARY), and
	// check res.Version against the host library's version (devlib.CheckVersion).
	fmt.Println(res.Version, res.Target, len(res.PTX) > 0, res.Archive)
}
