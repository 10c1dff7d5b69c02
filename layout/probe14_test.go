package layout

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestProbe14NilDrawing: PrintLayout, WriteSVG, PrintTV and WriteTVSVG of a nil writer or
// drawable return an ErrInvalid error naming it (they panicked: nil pointer), and a nil
// *Error answers; probe 14.
func TestProbe14NilDrawing(t *testing.T) {
	l := MustParse("(4,2):(2,1)")
	var nl *Layout
	for what, call := range map[string]func() error{
		"PrintLayout(nil writer)":  func() error { return PrintLayout(nil, l) },
		"PrintLayout(nil layout)":  func() error { return PrintLayout(io.Discard, nil) },
		"PrintLayout(nil *Layout)": func() error { return PrintLayout(io.Discard, nl) },
		"WriteSVG(nil writer)":     func() error { return WriteSVG(nil, l) },
		"WriteSVG(nil layout)":     func() error { return WriteSVG(io.Discard, nil) },
		"PrintTV(nil writer)":      func() error { return PrintTV(nil, l, Ints(4, 2)) },
		"WriteTVSVG(nil writer)":   func() error { return WriteTVSVG(nil, l, Ints(4, 2)) },
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s panicked: %v", what, r)
				}
			}()
			err = call()
		}()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nil") {
			t.Errorf("%s = %v; want ErrInvalid naming the nil", what, err)
		}
	}
	var e *Error
	if e.Error() != "layout: a nil *Error" || e.Unwrap() != nil {
		t.Error("nil *Error")
	}
	if err := PrintLayout(io.Discard, l); err != nil {
		t.Error(err)
	}
}
