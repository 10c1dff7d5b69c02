package main

import (
	"bytes"
	"fmt"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
)

// printMMA writes the A (M x K), B (N x K) and C (M x N) thread-value layouts of an atom:
// each cell holds the lane and value that own it (T/V). With svg set it draws each into
// svg's name with _A, _B or _C before the extension.
func printMMA(text *bytes.Buffer, a dsl.MMAAtom, svg string) error {
	fmt.Fprintf(text, "%s (%s): M=%d N=%d K=%d\n", a.CuteName(), a.Name, a.M, a.N, a.K)
	for _, p := range []struct {
		name, tag  string
		tv         layout.Layout
		rows, cols int
	}{{"A (M x K)", "A", a.ALayout, a.M, a.K}, {"B (N x K)", "B", a.BLayout, a.N, a.K}, {"C (M x N)", "C", a.CLayout, a.M, a.N}} {
		fmt.Fprintf(text, "\n%s:\n", p.name)
		if err := layout.PrintTV(text, p.tv, layout.Ints(p.rows, p.cols)); err != nil {
			return err
		}
		if svg == "" {
			continue
		}
		var pic bytes.Buffer
		if err := layout.WriteTVSVG(&pic, p.tv, layout.Ints(p.rows, p.cols)); err != nil {
			return err
		}
		ext := filepath.Ext(svg)
		name := strings.TrimSuffix(svg, ext) + "_" + p.tag + ext
		if err := os.WriteFile(name, pic.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(text, "(drawn into %s)\n", name)
	}
	return nil
}

func init() {
	register(&command{
		name:    "layout",
		summary: "print a rank-2 layout (plain, swizzled or composed) as a grid of indices, or draw it (--svg); thread-value layouts with --tv; an MMA atom's with --mma",
		usage:   `"LAYOUT" [--svg FILE]  |  --tv "THR" "VAL" [--svg FILE]  |  --mma ATOM [--svg FILE]   e.g. kgen layout "(4,8):(8,1)", kgen layout "Sw<3,0,3> o 0 o (8,8):(8,1)", kgen layout --mma MMA_16x8x16_F32BF16BF16F32`,
		run:     runLayout,
	})
}

// maxLayoutCells is the most elements kgen layout prints or draws (a 256 x 256 grid).
const maxLayoutCells = 1 << 16

func runLayout(e *env, args []string) error {
	c := commands["layout"]
	fs := flags(e, c)
	svg := fs.String("svg", "", "also draw the layout as SVG into FILE")
	tv := fs.Bool("tv", false, "take a thread layout and a value layout and show make_layout_tv's result (T/V per cell)")
	mma := fs.String("mma", "", "show the thread-value layouts of an MMA atom's A, B and C (e.g. MMA_16x8x16_F32BF16BF16F32); --svg F.svg draws them into F_A.svg, F_B.svg, F_C.svg")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	parse := func(s string) (layout.Layout, error) {
		l, err := layout.Parse(s)
		if err != nil {
			// A syntax error quotes the text itself; another (an overflow) does not, and says
			// "layout: " already.
			msg, ok := strings.CutPrefix(err.Error(), "layout: parse ")
			if !ok {
				msg = excerpt.Quote(s) + ": " + strings.TrimPrefix(err.Error(), "layout: ")
			}
			return l, &usageError{"bad layout " + msg}
		}
		n := 1
		for _, x := range l.Shape().Leaves() {
			if x > 0 && n > maxLayoutCells/x {
				return l, usagef("layout %q has more than %d elements; kgen layout draws at most that many", s, maxLayoutCells)
			}
			n *= x
		}
		return l, nil
	}
	var text, pic bytes.Buffer
	switch {
	case *mma != "":
		if len(pos) != 0 {
			return usagef("--mma takes no layouts")
		}
		if *tv {
			return usagef("--mma with --tv: give one (--mma shows the atom's own thread-value layouts)")
		}
		atom, err := dsl.LookupMMAAtom(*mma)
		if err != nil {
			return &usageError{err.Error()}
		}
		if err := printMMA(&text, atom, *svg); err != nil {
			return err
		}
		*svg = "" // printMMA wrote its three pictures
	case *tv:
		if len(pos) != 2 {
			return usagef(`--tv wants two layouts: "THR" "VAL"`)
		}
		thr, err := parse(pos[0])
		if err != nil {
			return err
		}
		val, err := parse(pos[1])
		if err != nil {
			return err
		}
		if thr.Size()*val.Size() > maxLayoutCells {
			return usagef("--tv: %d threads x %d values is more than the %d cells kgen layout draws", thr.Size(), val.Size(), maxLayoutCells)
		}
		tiler, tvl, err := layout.MakeLayoutTV(thr, val)
		if err != nil {
			return badInput(err)
		}
		fmt.Fprintf(&text, "tiler %v, tv layout %v\n", tiler, tvl)
		if err := layout.PrintTV(&text, tvl, tiler); err != nil {
			return badInput(err)
		}
		if *svg != "" {
			if err := layout.WriteTVSVG(&pic, tvl, tiler); err != nil {
				return badInput(err)
			}
		}
	default:
		if len(pos) != 1 {
			return usagef(`want one LAYOUT, e.g. "(4,8):(8,1)" or "Sw<3,0,3> o 0 o (8,8):(8,1)"`)
		}
		var l layout.Drawable
		if composed(pos[0]) {
			c, err := layout.ParseComposed(pos[0])
			if err != nil {
				msg := strings.TrimPrefix(err.Error(), "layout: ")
				if rest, ok := strings.CutPrefix(msg, "parse "); ok {
					msg = rest // it quotes the input
				} else {
					msg = excerpt.Quote(pos[0]) + ": " + msg
				}
				return &usageError{"bad composed layout " + msg}
			}
			l = c
		} else {
			p, err := parse(pos[0])
			if err != nil {
				return err
			}
			l = p
		}
		if err := layout.PrintLayout(&text, l); err != nil {
			return badInput(err)
		}
		if *svg != "" {
			if err := layout.WriteSVG(&pic, l); err != nil {
				return badInput(err)
			}
		}
	}
	if *svg != "" {
		if err := os.WriteFile(*svg, pic.Bytes(), 0o644); err != nil {
			return err
		}
	}
	_, err = e.stdout.Write(text.Bytes())
	return err
}

// badInput is a usage error for what the layout package refuses in the layouts given (a
// rank above 2, a thread-value layout outside its tile): they are drawn into memory, so
// its errors are about the input, not a failure to write (exit 2, not 1).
func badInput(err error) error {
	return &usageError{strings.TrimPrefix(err.Error(), "layout: ")}
}

// composed reports whether s is written as a composed layout ("Sw<3,0,3> o 0 o (8,8):(8,1)"):
// a swizzle, or "o" between parts.
func composed(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "Sw<") || strings.Contains(s, " o ")
}
