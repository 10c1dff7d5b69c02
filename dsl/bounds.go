package dsl

import "github.com/kgen-dev/kgen/ptx"

// LaunchBounds declares the largest block the kernel is launched with (.maxntid) and, when
// minBlocks > 0, how many such blocks each SM should hold at once (.minnctapersm): ptxas then
// keeps every thread's registers within what minBlocks blocks of maxThreads threads leave
// (CUDA's __launch_bounds__). A launch with a larger block fails. Declare the bounds once:
// a second call with other bounds is a Build error.
func (k *Kernel) LaunchBounds(maxThreads, minBlocks int) {
	if !k.live() {
		return
	}
	if maxThreads < 1 || maxThreads > 1024 || minBlocks < 0 {
		k.errorf("LaunchBounds(%d, %d): want 1..1024 threads and at least 0 blocks per SM", maxThreads, minBlocks)
		return
	}
	if k.boundsAt != (ptx.Pos{}) && (k.fn.MaxNTID != [3]int{maxThreads, 1, 1} || k.fn.MinNCTA != minBlocks) {
		// The last call won silently: a helper that declared the 128 threads its code
		// assumes was overridden by a later LaunchBounds(256, ...), and the launch checks
		// only the later bound.
		k.errorf("LaunchBounds(%d, %d): the kernel's bounds were already declared as (%d, %d) at %s:%d; declare them once", maxThreads, minBlocks, k.fn.MaxNTID[0], k.fn.MinNCTA, k.boundsAt.File, k.boundsAt.Line)
		return
	}
	k.boundsAt = callerPos()
	k.fn.MaxNTID = [3]int{maxThreads, 1, 1}
	k.fn.MinNCTA = minBlocks
}
