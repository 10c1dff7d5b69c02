// Package doccheck keeps the Go snippets of docs/*.md honest: a fence preceded by
// <!-- compiled: FILE [FUNC] --> must appear, line by line (indentation aside), in the
// named _test.go file (inside function FUNC when given), which the package's tests compile.
// The snippets with nowhere else to live are in this package's tests.
package doccheck
