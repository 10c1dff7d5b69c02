// Command cgocallback builds a kernel from Go code that C called (a cgo callback), with C
// compiled to keep a value in the frame-pointer register: the DSL's frame-pointer walk must
// not follow it. It prints the build error, whose position must be the misuse's line.
// Run by dsl's TestFrameWalkThroughCgoCallback.
package main

/*
#cgo CFLAGS: -O2 -fomit-frame-pointer
extern void goBuild(void);
static volatile long seed = 0x7f1234560001;
// Keep values live across the call in callee-saved registers, rbp among them.
__attribute__((noinline)) static long callit(void) {
	long b0 = seed, b1 = seed * 3, b2 = seed * 5, b3 = seed * 7, b4 = seed * 9, b5 = seed * 11, b6 = seed * 13;
	goBuild();
	return b0 ^ b1 ^ b2 ^ b3 ^ b4 ^ b5 ^ b6;
}
static long run(void) { return callit(); }
*/
import "C"

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
)

//export goBuild
func goBuild() {
	for i := 0; i < 3; i++ { // the first build learns, the next ones walk
		k := dsl.New("k")
		a, b := k.Param("a", dsl.F32), k.Param("b", dsl.I32)
		a.Add(b) // MISUSE
		_, err := k.Build()
		fmt.Println(err)
	}
}

func main() { C.run() }
