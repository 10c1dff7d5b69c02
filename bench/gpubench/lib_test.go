package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestLibOnEmulator runs gpubench lib on the emulator with every shape divided by 65536:
// every case must pass its check against the host reference and print its timing line.
func TestLibOnEmulator(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	var out bytes.Buffer
	if err := lib(&out, []string{"-div", "65536", "-reps", "1"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range libCases() {
		c = c.scaled(65536)
		want := fmt.Sprintf("kgen\t%s\t%s\t%s\t", c.kernel, c.dt, c.shape())
		if !strings.Contains(out.String(), want) {
			t.Errorf("no line for %s %s %s in:\n%s", c.kernel, c.dt, c.shape(), out.String())
		}
	}
	if n := strings.Count(out.String(), "memcpy\t"); n != 5 {
		t.Errorf("%d memcpy lines, want 5", n)
	}
}

// TestLibSplitOnEmulator runs the row kernels at shapes divided by 1024 (the long-row
// shapes become one row of 16384 elements: two blocks a row on the emulator's 16 SMs): each
// case must pass its check, the split kernels launch co-resident with two parts a row, and
// of each family's two kernels at a long-row shape exactly one is the host's choice (the
// split one: one row leaves SMs idle).
func TestLibSplitOnEmulator(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	var out bytes.Buffer
	if err := lib(&out, []string{"-div", "1024", "-reps", "1", "-only", "softmax_split,row_sum_split,softmax,row_sum"}); err != nil {
		t.Fatal(err)
	}
	choices := map[string]int{} // "KERNEL DTYPE SHAPE CHOICE" -> lines
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Split(line, "\t")
		if f[0] != "kgen" {
			continue
		}
		if len(f) != 8 || (f[7] != "chosen" && f[7] != "other") {
			t.Errorf("line %q: want 8 fields ending in chosen or other", line)
			continue
		}
		if strings.HasSuffix(f[1], "_split") && !strings.HasSuffix(f[4], "/2") {
			t.Errorf("line %q: want a split launch of 2 parts a row", line)
		}
		choices[strings.Join(f[1:4], " ")+" "+f[7]]++
	}
	n := 0
	for _, c := range libCases() {
		if !strings.HasSuffix(c.kernel, "_split") {
			continue
		}
		c = c.scaled(1024)
		n++
		one := strings.TrimSuffix(c.kernel, "_split") + " " + c.dt.String() + " " + c.shape()
		split := c.kernel + " " + c.dt.String() + " " + c.shape()
		if choices[split+" chosen"] == 0 || choices[split+" other"] != 0 || choices[one+" other"] != choices[split+" chosen"] {
			t.Errorf("%s: want the split kernel chosen on every line, in:\n%s", split, out.String())
		}
	}
	if n == 0 {
		t.Fatal("no split-row cases")
	}
}
