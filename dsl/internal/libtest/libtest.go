// Package libtest is a stand-in library of DSL operations for dsl's tests of MarkLibrary.
package libtest

import "github.com/kgen-dev/kgen/dsl"

// Add returns a + b, emitted from this package.
func Add(a, b dsl.Value) dsl.Value { return a.Add(b) }

// Mark marks this package as a library (dsl.MarkLibrary).
func Mark() { dsl.MarkLibrary() }
