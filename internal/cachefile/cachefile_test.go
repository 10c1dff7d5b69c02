package cachefile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestReadBoundedByHeader(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "e")
	size := func(h []byte) (int64, bool) {
		n, err := strconv.Atoi(string(h[:2]))
		return int64(n), err == nil
	}
	os.WriteFile(p, []byte("05abc"), 0o644)
	if b, err := Read(p, 100, 2, size); err != nil || string(b) != "05abc" {
		t.Fatalf("Read = %q, %v", b, err)
	}
	os.WriteFile(p, []byte("04abc"), 0o644)
	if _, err := Read(p, 100, 2, size); err == nil {
		t.Error("a file longer than its header says was read")
	}
	if _, err := Read(p, 3, 2, size); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	if runtime.GOOS != "windows" {
		q := filepath.Join(dir, "z")
		os.Symlink("/dev/zero", q)
		if _, err := Read(q, 100, 0, nil); !errors.Is(err, ErrNotRegular) {
			t.Errorf("symlink: %v", err)
		}
	}
}

func TestCheckDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix modes")
	}
	dir := t.TempDir()
	if err := CheckDir(filepath.Join(dir, "absent")); err != nil {
		t.Errorf("absent: %v", err)
	}
	os.Chmod(dir, 0o755)
	if err := CheckDir(dir); err != nil {
		t.Errorf("private: %v", err)
	}
	os.Chmod(dir, 0o775)
	var ue *UnsafeError
	if err := CheckDir(dir); !errors.As(err, &ue) || ue.Path != dir {
		t.Errorf("group-writable: %v", err)
	}
	os.Chmod(dir, 0o700)
	if os.Getuid() != 0 {
		if err := CheckDir("/"); !errors.As(err, &ue) {
			t.Errorf("a folder owned by root: %v", err)
		}
	}
}

// TestCheckDirNotAFolder: a file, FIFO or device where the cache folder should be is named
// as what it is, not as a safety risk (it said "whoever can write there can change ...";
// probe 12).
func TestCheckDirNotAFolder(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{f: "a regular file", "/dev/null": "a character device"} {
		err := CheckDir(path)
		var ue *UnsafeError
		if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), "is "+kind+", not a folder") || strings.Contains(err.Error(), "whoever") {
			t.Errorf("%s: %v; want a plain error naming a %s", path, err, kind)
		}
	}
}
