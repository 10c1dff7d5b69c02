package gen

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe13LongNamesQuoted: a 100 KB package name, Generator or kernel name is quoted as
// an excerpt in Files' refusal (each was quoted whole; probe 13).
func TestProbe13LongNamesQuoted(t *testing.T) {
	long := strings.Repeat("9", 100000)
	for what, p := range map[string]Package{
		"Name":        {Name: long, Targets: []ptx.Target{ptx.SM90}, Kernels: []Kernel{probe7Kernel("x")}},
		"Generator":   {Name: "p", Targets: []ptx.Target{ptx.SM90}, Kernels: []Kernel{probe7Kernel("x")}, Generator: long + "\n"},
		"kernel name": {Name: "p", Targets: []ptx.Target{ptx.SM90}, Kernels: []Kernel{probe7Kernel("$" + long)}},
	} {
		_, err := Files(p)
		if err == nil || len(err.Error()) > 1000 {
			n := 0
			if err != nil {
				n = len(err.Error())
			}
			t.Errorf("a 100 KB %s: %d bytes: %.200v", what, n, err)
		}
	}
}
