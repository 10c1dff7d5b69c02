// Package excerpt quotes user input in error messages without quoting all of it: a 10 MB
// layout or PTX line gives an error of a few hundred bytes, still naming where it went wrong.
package excerpt

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Max is the most bytes of input Quote and Around show.
const Max = 64

// Quote returns s quoted (strconv.Quote) when it is at most Max bytes; else its first bytes
// (cut at a rune boundary), quoted, then "... (N bytes)".
func Quote(s string) string {
	if len(s) <= Max {
		return strconv.Quote(s)
	}
	return strconv.Quote(cut(s, Max)) + fmt.Sprintf("... (%d bytes)", len(s))
}

// Cut returns s when it is at most n bytes; else its first bytes (cut at a rune boundary)
// then "... (N bytes)": a long message (an error from elsewhere) quoted unquoted, bounded.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cut(s, n) + fmt.Sprintf("... (%d bytes)", len(s))
}

// Around returns a quoted excerpt of s around byte offset i (at most Max bytes of it), with
// "..." where it leaves out a part, so that an error can show where in a long input it is.
func Around(s string, i int) string {
	if len(s) <= Max {
		return strconv.Quote(s)
	}
	i = max(0, min(i, len(s)))
	lo := max(0, i-Max/2)
	for lo > 0 && !utf8.RuneStart(s[lo]) {
		lo--
	}
	hi := min(len(s), lo+Max)
	for hi < len(s) && !utf8.RuneStart(s[hi]) {
		hi++
	}
	out := strconv.Quote(s[lo:hi])
	if lo > 0 {
		out = "..." + out
	}
	if hi < len(s) {
		out += "..."
	}
	return out + fmt.Sprintf(" (%d bytes)", len(s))
}

// Rune returns the character at byte offset i of s, quoted as a Go rune literal ('０', not
// the first byte of its UTF-8 encoding, 'ï'); an invalid byte is shown as '\xNN'.
func Rune(s string, i int) string {
	if i < 0 || i >= len(s) {
		return "end of input"
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n <= 1 {
		return fmt.Sprintf("'\\x%02x'", s[i])
	}
	return strconv.QuoteRune(r)
}

// cut returns at most n bytes of s, ending at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
