package devlib

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe17BoundedErrors: ParseDecls quotes a 100 KB token or name as an excerpt (each was
// quoted whole, as was a long target by PlanTarget), ParseLLVM lists its first few problems, each bounded (20000 bad defines gave
// an 800 KB error), and a version mismatch quotes a long version as an excerpt (probe 17).
func TestProbe17BoundedErrors(t *testing.T) {
	big := strings.Repeat("x", 100000)
	var many strings.Builder
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&many, "define void @f%d(%%nope) {\n", i)
	}
	for _, c := range []struct {
		what string
		call func() error
		want string
	}{
		{"a long type", func() error { _, err := ParseDecls([]byte(".func f(.param ." + big + " a);")); return err }, "unknown type .xxx"},
		{"a long .align", func() error { _, err := ParseDecls([]byte(".func f(.param .align " + big + " .b32 a);")); return err }, "bad .align \"xxx"},
		{"a long directive", func() error { _, err := ParseDecls([]byte(".func f(.param .b32 ." + big + ");")); return err }, "unexpected .xxx"},
		{"a long parameter", func() error { _, err := ParseDecls([]byte(".func f(" + big + ");")); return err }, "want .param, got \"xxx"},
		{"a long array length", func() error { _, err := ParseDecls([]byte(".func f(.param .b32 a[" + big + "]);")); return err }, "bad array length \"xxx"},
		{"a long name twice", func() error {
			_, err := ParseDecls([]byte(".func " + big + "(.param .b32 a);\n.func " + big + "(.param .b64 a);"))
			return err
		}, "twice, differently"},
		{"a long name in a bad parameter", func() error { _, err := ParseDecls([]byte(".func " + big + "(.param .b33 a);")); return err }, "unknown type .b33"},
		{"20000 bad defines", func() error { _, err := ParseLLVM(strings.NewReader(many.String())); return err }, "20000 function signature(s) could not be read: f0: parameter 0: unknown type %nope; f1:"},
		{"a long define", func() error { _, err := ParseLLVM(strings.NewReader("define void @" + big + "(%q) {\n")); return err }, "1 function signature(s) could not be read: xxx"},
		{"a long target", func() error { _, err := PlanTarget(ptx.Target("sm_" + big)); return err }, `unsupported target "sm_xxx`},
		{"a long built version", func() error { return CheckVersion(strings.Repeat(" ", 100000)+"3.4.5", "3.4.6") }, "was built from NVSHMEM "},
	} {
		err := c.call()
		if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 2000 {
			n := 0
			if err != nil {
				n = len(err.Error())
			}
			t.Errorf("%s: %d bytes: %.300v; want a short error holding %q", c.what, n, err, c.want)
		}
	}
	_, err := ParseLLVM(strings.NewReader(many.String()))
	if err == nil || !strings.HasSuffix(err.Error(), "; and 19995 more") {
		t.Errorf("20000 bad defines: %.300v; want the count of those left out", err)
	}
}

// TestProbe17Version: ParseVersion refuses parts with a sign and parts longer than 10 digits
// naming the part (Atoi read "3.4.+5" as 3.4.5 and "3.4.-0" as 3.4.0, and a part of 100000
// zeros and a 5 as 5); probe 17.
func TestProbe17Version(t *testing.T) {
	for _, v := range []string{"3.4.+5", "3.4.-0", "3.4.5.+1", "+3.4.5", "3.4." + strings.Repeat("0", 100000) + "5", "3.4.12345678901", "3..5"} {
		_, err := ParseVersion(v)
		if err == nil || !strings.Contains(err.Error(), "bad NVSHMEM version") || !strings.Contains(err.Error(), "is not 1 to 10 decimal digits") || len(err.Error()) > 300 {
			t.Errorf("ParseVersion(%.40q) = %.300v; want an error naming the part", v, err)
		}
	}
	for _, v := range []string{"3.4.5", "v3.4.5", " 3.4.5\n", "3.4.5.0", "03.004.005", "3.4.1234567890"} {
		if _, err := ParseVersion(v); err != nil {
			t.Errorf("ParseVersion(%q): %v", v, err)
		}
	}
}

// TestProbe17HeaderLineTooLong: a devlib header line past 1 MiB is called too long, not "no
// kgen-devlib header" (the scanner's error was dropped); probe 17.
func TestProbe17HeaderLineTooLong(t *testing.T) {
	_, err := ParseHeader([]byte("// kgen-devlib: 1\n// nvshmem: " + strings.Repeat("9", 2<<20) + "\n"))
	if err == nil || !strings.Contains(err.Error(), "a header line is at most 1 MiB") {
		t.Errorf("ParseHeader of a 2 MiB header line: %v", err)
	}
}

// TestProbe17OpenVersionChecked: Open refuses an installation whose version header defines
// a part of 100000 digits (the version named cache folders no file system takes); probe 17.
func TestProbe17OpenVersionChecked(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{"lib", "include"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"lib/libnvshmem_device.bc", "lib/libnvshmem_device.a"} {
		if err := os.WriteFile(filepath.Join(home, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ patch, want string }{
		{strings.Repeat("7", 100000), ": bad NVSHMEM version \"3.4.777"},
		{"5", ""},
	} {
		h := "#define NVSHMEM_VENDOR_MAJOR_VERSION 3\n#define NVSHMEM_VENDOR_MINOR_VERSION 4\n#define NVSHMEM_VENDOR_PATCH_VERSION " + c.patch + "\n"
		if err := os.WriteFile(filepath.Join(home, "include", "nvshmem_version.h"), []byte(h), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(home)
		switch {
		case c.want == "" && (err != nil || l.Version != "3.4.5"):
			t.Errorf("Open with patch %s: %v", c.patch, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), home+c.want) || len(err.Error()) > 1000):
			t.Errorf("Open with patch of %d bytes: %.300v; want an error holding %q", len(c.patch), err, c.want)
		}
	}
}
