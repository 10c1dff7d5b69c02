package shmemu

// OddOnes is oddOnes, for the external tests.
var OddOnes = oddOnes

// BookLink marks the link from PE from to PE to busy until logical time t, for the tests.
func (e *Emulator) BookLink(from, to int, t int64) { e.link[[2]int{from, to}] = t }
