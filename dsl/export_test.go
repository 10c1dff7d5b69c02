package dsl

// SetExactCallers makes every position come from runtime.Callers instead of the
// frame-pointer walk (true) or restores the walk (false).
func SetExactCallers(exact bool) { exactCallers.Store(exact) }
