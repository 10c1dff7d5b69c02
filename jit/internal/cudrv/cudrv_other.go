//go:build cuda && !(linux && amd64)

package cudrv

// Loaded reports that this build loads the driver itself; elsewhere than linux/amd64 it does
// not: gorgonia.org/cu links libcuda directly, and its init exits when cuInit fails.
const Loaded = false

// Err is always nil here: a process that got this far has an initialised driver.
func Err() error { return nil }

// Path returns "" (the driver is linked, not loaded).
func Path() string { return "" }
