package shmemu

// OddOnes is oddOnes, for the external tests.
var OddOnes = oddOnes
