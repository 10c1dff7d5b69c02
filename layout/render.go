package layout

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"strconv"
	"strings"
)

// rank2 returns the layout as rank 2 (a rank-1 layout gets a 1:0 mode) and
// its extents.
func rank2(l Layout) (Layout, int, int, error) {
	switch l.Rank() {
	case 1:
		l = makeLayout(l, mk(Int(1), Int(0)))
	case 2:
	default:
		return Layout{}, 0, 0, &Error{ErrRank, "rendering needs a rank-1 or rank-2 layout, got " + shown(l)}
	}
	var M, N int
	err := catch(func() {
		M, N = product(l.shape.elems[0]), product(l.shape.elems[1])
		if M < 1 || N < 1 {
			fail(ErrInvalid, "layout %v has an extent below 1", l)
		}
		if cells := mul(M, N); cells > maxCells {
			fail(ErrInvalid, "layout %v has %d cells, more than the %d that can be drawn", l, cells, maxCells)
		}
	})
	if err != nil {
		return Layout{}, 0, 0, err
	}
	return l, M, N, nil
}

// maxCells bounds the grids PrintLayout, WriteSVG, PrintTV and WriteTVSVG
// draw.
const maxCells = 1 << 20

func at2(l Layout, m, n int) int {
	return valueInt(m, l.shape.elems[0], l.stride.elems[0]) + valueInt(n, l.shape.elems[1], l.stride.elems[1])
}

// Drawable is what PrintLayout and WriteSVG draw: a Layout or a
// ComposedLayout (a swizzled layout).
type Drawable interface {
	String() string
	// grid returns the extents of the rank-2 grid, its value at (m,n) and
	// the size that sets the text width.
	grid() (M, N int, at func(m, n int) int, cosize int, err error)
}

// checkDraw refuses a nil writer or drawable (a nil *Layout or *ComposedLayout too).
func checkDraw(op string, w io.Writer, l Drawable) error {
	switch d := l.(type) {
	case nil:
		return &Error{Kind: ErrInvalid, Msg: op + ": nil Drawable"}
	case *Layout:
		if d == nil {
			return &Error{Kind: ErrInvalid, Msg: op + ": nil *Layout"}
		}
	case *ComposedLayout:
		if d == nil {
			return &Error{Kind: ErrInvalid, Msg: op + ": nil *ComposedLayout"}
		}
	}
	if w == nil {
		return &Error{Kind: ErrInvalid, Msg: op + ": nil io.Writer"}
	}
	return nil
}

func (l Layout) grid() (int, int, func(m, n int) int, int, error) {
	l2, M, N, err := rank2(l)
	if err != nil {
		return 0, 0, nil, 0, err
	}
	return M, N, func(m, n int) int { return at2(l2, m, n) }, l.Cosize(), nil
}

func (c ComposedLayout) grid() (int, int, func(m, n int) int, int, error) {
	l2, M, N, err := rank2(c.Inner)
	if err != nil {
		return 0, 0, nil, 0, err
	}
	if sw, ok := c.Outer.(Swizzle); ok {
		if err := sw.check(); err != nil {
			return 0, 0, nil, 0, err
		}
	}
	at := func(m, n int) int {
		v := c.Offset + at2(l2, m, n)
		if c.Outer != nil {
			v = c.Outer.Apply(v)
		}
		return v
	}
	size := 0
	err = catch(func() {
		for m := 0; m < M; m++ {
			for n := 0; n < N; n++ {
				size = max(size, at(m, n)+1)
			}
		}
	})
	return M, N, at, size, err
}

// PrintLayout writes a rank-2 layout as a grid of its indices, row m and
// column n holding L(m,n), in the format of cute::print_layout. A rank-1
// layout prints as one column; a composed layout prints its values
// Outer(Offset + Inner(m,n)) over the inner layout's grid.
func PrintLayout(w io.Writer, l Drawable) error {
	if err := checkDraw("PrintLayout", w, l); err != nil {
		return err
	}
	M, N, at, cosize, err := l.grid()
	if err != nil {
		return err
	}
	b := bufio.NewWriter(w)
	// The cells are as wide as cute::print_layout makes them (the digits of the cosize),
	// or wider for a value or column index that needs more (a negative value, from a
	// negative stride or offset, or the columns of a stride-0 layout outran the cells).
	digits := max(len(strconv.Itoa(cosize)), len(strconv.Itoa(N-1)))
	for m := 0; m < M; m++ {
		for n := 0; n < N; n++ {
			digits = max(digits, len(strconv.Itoa(at(m, n))))
		}
	}
	width := digits + 2
	rowDigits := max(2, len(strconv.Itoa(M-1))) // the row labels: 2 wide as cute's, or more
	indent := strings.Repeat(" ", rowDigits+2)
	const delim = "+-----------------------"
	rule := func() {
		b.WriteString(indent)
		for n := 0; n < N; n++ {
			d := delim
			if width+1 < len(d) {
				d = d[:width+1]
			} else {
				d += dashes(width + 1 - len(d))
			}
			b.WriteString(d)
		}
		b.WriteString("+\n")
	}
	header := indent
	for n := 0; n < N; n++ {
		header += fmt.Sprintf("  %*d ", width-2, n)
	}
	fmt.Fprintf(b, "%v\n%s\n", l, strings.TrimRight(header, " "))
	for m := 0; m < M; m++ {
		rule()
		fmt.Fprintf(b, "%*d  ", rowDigits, m)
		for n := 0; n < N; n++ {
			fmt.Fprintf(b, "| %*d ", width-2, at(m, n))
		}
		b.WriteString("|\n")
	}
	rule()
	return b.Flush()
}

func dashes(n int) string {
	out := make([]byte, n)
	for i := range out {
		out[i] = '-'
	}
	return string(out)
}

const cell = 36 // SVG cell size in pixels

var grays = [8]string{"#ffffff", "#999999", "#cccccc", "#666666", "#e6e6e6", "#808080", "#b3b3b3", "#4d4d4d"}

// tvColors are CuTe's TikzColor_TV colours, by thread modulo 8.
var tvColors = [8]string{"#afafff", "#afffaf", "#ffffaf", "#ffafaf", "#d2d2ff", "#d2ffd2", "#ffffd2", "#ffd2d2"}

func svgHeader(b *bufio.Writer, M, N int, title string) {
	wd, ht := (N+1)*cell+2, (M+1)*cell+2+cell/2
	wd = max(wd, 7*len(title)+8)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="11">`+"\n", wd, ht, wd, ht)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="2" y="%d" font-size="12">%s</text>`+"\n", cell/2-4, html.EscapeString(title))
	for n := 0; n < N; n++ {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" fill="#555">%d</text>`+"\n", (n+1)*cell+cell/2, cell+cell/2-6, n)
	}
	for m := 0; m < M; m++ {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" fill="#555">%d</text>`+"\n", cell/2, (m+1)*cell+cell/2+cell/2+4, m)
	}
}

func svgCell(b *bufio.Writer, m, n int, fill, text string, dark bool) {
	x, y := (n+1)*cell, (m+1)*cell+cell/2
	color := "black"
	if dark {
		color = "white"
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="black"/>`+"\n", x, y, cell, cell, fill)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" fill="%s">%s</text>`+"\n", x+cell/2, y+cell/2+4, color, text)
}

// WriteSVG draws a rank-2 layout (rank 1 draws one column) or a composed
// layout as an SVG grid: cell (m,n) holds L(m,n) and is shaded by L(m,n)
// modulo 8, like cute::print_latex.
func WriteSVG(w io.Writer, l Drawable) error {
	if err := checkDraw("WriteSVG", w, l); err != nil {
		return err
	}
	M, N, at, _, err := l.grid()
	if err != nil {
		return err
	}
	b := bufio.NewWriter(w)
	svgHeader(b, M, N, l.String())
	for m := 0; m < M; m++ {
		for n := 0; n < N; n++ {
			v := at(m, n)
			k := ((v % 8) + 8) % 8
			svgCell(b, m, n, grays[k], strconv.Itoa(v), k == 3 || k == 5 || k == 7)
		}
	}
	b.WriteString("</svg>\n")
	return b.Flush()
}

// tvCells maps every (thread, value) of tv into the M x N tile given by the
// tiler (column-major, as make_layout_tv builds it). It returns, per cell,
// the last thread and value that land on it (-1 if none).
func tvCells(tv Layout, tiler IntTuple) (M, N int, thr, val []int, err error) {
	err = catch(func() {
		checkExtents("tiler", tiler)
		M, N = product(tiler.At(0)), 1
		if tiler.kind == kindTuple {
			if len(tiler.elems) > 2 {
				fail(ErrRank, "tiler %v has rank > 2", tiler)
			}
			if len(tiler.elems) == 2 {
				N = product(tiler.elems[1])
			}
		}
		if tv.Rank() != 2 {
			fail(ErrRank, "thread-value layout %v must be rank 2", tv)
		}
		if M < 1 || N < 1 {
			fail(ErrInvalid, "tiler %v has an extent below 1", tiler)
		}
		if cells := mul(M, N); cells > maxCells {
			fail(ErrInvalid, "tiler %v has %d cells, more than the %d that can be drawn", tiler, cells, maxCells)
		}
		T, V := product(tv.shape.elems[0]), product(tv.shape.elems[1])
		thr = make([]int, M*N)
		val = make([]int, M*N)
		for i := range thr {
			thr[i], val[i] = -1, -1
		}
		for v := 0; v < V; v++ {
			for t := 0; t < T; t++ {
				idx := at2(tv, t, v)
				if idx < 0 || idx >= M*N {
					fail(ErrInvalid, "TV layout maps (%d,%d) to %d, outside the %dx%d tile", t, v, idx, M, N)
				}
				thr[idx], val[idx] = t, v
			}
		}
	})
	return
}

// WriteTVSVG draws a thread-value layout (as returned by MakeLayoutTV) over
// its M x N tile: each cell shows the thread T and value V that own it,
// coloured by thread, like CuTe's print_svg / print_latex for TV layouts.
func WriteTVSVG(w io.Writer, tv Layout, tiler IntTuple) error {
	if w == nil {
		return &Error{Kind: ErrInvalid, Msg: "WriteTVSVG: nil io.Writer"}
	}
	M, N, thr, val, err := tvCells(tv, tiler)
	if err != nil {
		return err
	}
	b := bufio.NewWriter(w)
	svgHeader(b, M, N, tv.String())
	for n := 0; n < N; n++ {
		for m := 0; m < M; m++ {
			i := m + n*M
			x, y := (n+1)*cell, (m+1)*cell+cell/2
			if thr[i] < 0 {
				svgCell(b, m, n, "#ffffff", "", false)
				continue
			}
			fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="black"/>`+"\n", x, y, cell, cell, tvColors[thr[i]%8])
			fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">T%d</text>`+"\n", x+cell/2, y+cell/2-2, thr[i])
			fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">V%d</text>`+"\n", x+cell/2, y+cell/2+10, val[i])
		}
	}
	b.WriteString("</svg>\n")
	return b.Flush()
}

// PrintTV writes a thread-value layout over its tile as text: each cell is
// "T<thread>V<value>", like cute::print_layout(layout, thrid).
func PrintTV(w io.Writer, tv Layout, tiler IntTuple) error {
	if w == nil {
		return &Error{Kind: ErrInvalid, Msg: "PrintTV: nil io.Writer"}
	}
	M, N, thr, val, err := tvCells(tv, tiler)
	if err != nil {
		return err
	}
	b := bufio.NewWriter(w)
	tw, vw := 1, 1
	for i := range thr {
		tw = max(tw, len(strconv.Itoa(thr[i])))
		vw = max(vw, len(strconv.Itoa(val[i])))
	}
	cw := tw + vw + 2
	fmt.Fprintf(b, "%v over %v\n", tv, tiler)
	rule := "+" + dashes(cw)
	for m := 0; m < M; m++ {
		for n := 0; n < N; n++ {
			b.WriteString(rule)
		}
		b.WriteString("+\n")
		for n := 0; n < N; n++ {
			i := m + n*M
			if thr[i] < 0 {
				fmt.Fprintf(b, "|%*s", cw, "")
				continue
			}
			fmt.Fprintf(b, "|T%0*dV%0*d", tw, thr[i], vw, val[i])
		}
		b.WriteString("|\n")
	}
	for n := 0; n < N; n++ {
		b.WriteString(rule)
	}
	b.WriteString("+\n")
	return b.Flush()
}
