package layout

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/kgen-dev/kgen/internal/excerpt"
)

// Errors returned by this package wrap one of these sentinels; test with
// errors.Is.
var (
	// ErrInvalid: malformed input (bad syntax, a hole where a number is needed,
	// negative or zero extents, division by zero).
	ErrInvalid = errors.New("invalid input")
	// ErrRank: tuples that must be congruent (or of matching rank) are not.
	ErrRank = errors.New("mismatched ranks")
	// ErrDivisibility: CuTe's divisibility condition does not hold.
	ErrDivisibility = errors.New("divisibility condition violated")
	// ErrNotInjective: the layout is not injective where an injective one is
	// required (complement, left inverse).
	ErrNotInjective = errors.New("layout is not injective")
	// ErrOverflow: a result does not fit in an int.
	ErrOverflow = errors.New("integer overflow")
)

// Error is the error type of this package.
type Error struct {
	Kind error  // one of the sentinels above
	Msg  string // what happened
}

// Error implements the error interface (a nil *Error says it is nil).
func (e *Error) Error() string {
	if e == nil {
		return "layout: a nil *Error"
	}
	return "layout: " + e.Msg
}

// Unwrap returns the sentinel (nil for a nil *Error).
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Kind
}

// fail aborts the current operation; the public entry point recovers it and
// returns it as an error (see catch). No panic ever leaves the package.
func fail(kind error, format string, args ...any) {
	for i, a := range args {
		args[i] = clip(a)
	}
	panic(&Error{Kind: kind, Msg: fmt.Sprintf(format, args...)})
}

// maxShown bounds how much of a layout or tuple an error shows.
const maxShown = 200

// clip returns a layout, tuple or other value with a String method (or a string) whose text
// is longer than maxShown as that text's first bytes and its length, else a unchanged: an
// error about a layout of 50000 modes quoted all 200 KB of it.
func clip(a any) any {
	var s string
	switch v := a.(type) {
	case string:
		s = v
	case fmt.Stringer:
		s = v.String()
	default:
		return a
	}
	if len(s) <= maxShown {
		return a
	}
	return excerpt.Cut(s, maxShown)
}

// shown is l's text for an error, bounded as clip bounds it.
func shown(l Layout) string { return excerpt.Cut(l.String(), maxShown) }

// catch runs f and converts a failure raised by fail into an error.
func catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(*Error); ok {
				err = e
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}

// recoverErr is deferred by exported functions: it turns a failure raised
// by fail into the function's error result.
func recoverErr(err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(*Error); ok {
			*err = e
			return
		}
		panic(r)
	}
}

// recoverLayout is deferred by exported functions that return a layout: as
// recoverErr, and a result whose size or cosize overflows is an error, never
// a layout whose Size lies.
func recoverLayout(result *Layout, err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(*Error); ok {
			*result, *err = Layout{}, e
			return
		}
		panic(r)
	}
	if *err == nil {
		if e, ok := catch(result.validate).(*Error); ok {
			*result, *err = Layout{}, &Error{Kind: e.Kind, Msg: "the result " + shown(*result) + ": " + e.Msg}
		}
	}
}

func mul(a, b int) int {
	hi, lo := bits.Mul64(uint64(abs(a)), uint64(abs(b)))
	if hi != 0 || lo > 1<<62 {
		fail(ErrOverflow, "%d * %d overflows", a, b)
	}
	return a * b
}

func add(a, b int) int {
	s := a + b
	if (s > a) != (b > 0) || s > 1<<62 || s < -(1<<62) {
		fail(ErrOverflow, "%d + %d overflows", a, b)
	}
	return s
}

func abs(a int) int {
	if a < 0 {
		return -a
	}
	return a
}

func signum(a int) int {
	switch {
	case a > 0:
		return 1
	case a < 0:
		return -1
	}
	return 0
}
