package dsl

// LaunchBounds declares the largest block the kernel is launched with (.maxntid) and, when
// minBlocks > 0, how many such blocks each SM should hold at once (.minnctapersm): ptxas then
// keeps every thread's registers within what minBlocks blocks of maxThreads threads leave
// (CUDA's __launch_bounds__). A launch with a larger block fails.
func (k *Kernel) LaunchBounds(maxThreads, minBlocks int) {
	if maxThreads < 1 || maxThreads > 1024 || minBlocks < 0 {
		k.errorf("LaunchBounds(%d, %d): want 1..1024 threads and at least 0 blocks per SM", maxThreads, minBlocks)
		return
	}
	k.fn.MaxNTID = [3]int{maxThreads, 1, 1}
	k.fn.MinNCTA = minBlocks
}
