// Package cachefile reads kgen's on-disk cache entries without trusting what sits at their
// paths, and checks that a cache folder is private to the user who reads it.
//
// Both of kgen's caches (package jit's cubins and package devlib's PTX) go through it, so a
// FIFO, a device, a symlink or a folder at an entry's path is a miss (never a blocked read or
// an unbounded one), and an entry is read only as far as its own header says it is long.
package cachefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/kgen-dev/kgen/internal/excerpt"
)

// ErrNotRegular is wrapped by the errors of Open and Read for a path that is not a regular
// file (a symlink, FIFO, device, socket or folder).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the errors of Read for a file longer than its limit.
var ErrTooLarge = errors.New("larger than a cache entry may be")

// maxPath bounds a path the errors quote: a folder named by a 100 KB string gives a short
// error.
const maxPath = 512

// short is path for an error message: an excerpt past maxPath bytes.
func short(path string) string { return excerpt.Cut(path, maxPath) }

// shortErr is err with the path of an *fs.PathError (the os package's) cut to maxPath bytes;
// it still unwraps to the same cause.
func shortErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && len(pe.Path) > maxPath {
		return &fs.PathError{Op: pe.Op, Path: short(pe.Path), Err: pe.Err}
	}
	return err
}

// Open opens path for reading when it is a regular file and nothing else: it looks first
// (Lstat, so nothing else is ever opened), opens without following a symlink and without
// blocking (O_NOFOLLOW|O_NONBLOCK where the system has them), then checks again on the open
// file (fstat), so a swap between the look and the open is caught too.
func Open(path string) (*os.File, fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, nil, shortErr(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: %w (%s)", short(path), ErrNotRegular, fi.Mode().Type())
	}
	f, err := openNoFollow(path)
	if err != nil {
		return nil, nil, shortErr(err)
	}
	fi, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, shortErr(err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w (%s)", short(path), ErrNotRegular, fi.Mode().Type())
	}
	return f, fi, nil
}

// Read returns the whole of the regular file at path. It reads at most headLen bytes first and
// asks size for the file's whole length as its header states it; a header that states none
// (ok false), a file whose length differs from it, or one longer than max is an error, and
// nothing past the stated length is read. size nil means "as long as the file is", still
// bounded by max.
func Read(path string, max int64, headLen int, size func(head []byte) (n int64, ok bool)) ([]byte, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n := fi.Size()
	if n > max {
		return nil, fmt.Errorf("%s: %w (%d bytes, at most %d)", short(path), ErrTooLarge, n, max)
	}
	if size != nil {
		h := int64(headLen)
		if h > n {
			h = n
		}
		head := make([]byte, h)
		if _, err := io.ReadFull(f, head); err != nil {
			return nil, fmt.Errorf("%s: %w", short(path), err)
		}
		want, ok := size(head)
		if !ok {
			return nil, fmt.Errorf("%s: not a cache entry (no length in its header)", short(path))
		}
		if want != n {
			return nil, fmt.Errorf("%s: the header says %d bytes, the file has %d", short(path), want, n)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("%s: %w", short(path), err)
		}
	}
	// Read exactly n bytes, and one more to see that the file did not grow meanwhile.
	b := make([]byte, n+1)
	m, err := io.ReadFull(f, b)
	switch {
	case err == nil:
		return nil, fmt.Errorf("%s: grew while it was read", short(path))
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		if int64(m) != n {
			return nil, fmt.Errorf("%s: shrank while it was read (%d of %d bytes)", short(path), m, n)
		}
		return b[:n], nil
	default:
		return nil, fmt.Errorf("%s: %w", short(path), err)
	}
}

// UnsafeError says why a cache folder or entry is refused: others than its reader may write
// it (or own it), so they could substitute what the cache serves.
type UnsafeError struct {
	Path   string
	Reason string
	// Stakes is what whoever writes there could change, in words; "" is the code caches'
	// ("the code kgen loads (entries carry a checksum, not a signature)").
	Stakes string
}

// Error says what is unsafe, why it matters and how to fix it.
func (e *UnsafeError) Error() string {
	stakes := e.Stakes
	if stakes == "" {
		stakes = "the code kgen loads (entries carry a checksum, not a signature)"
	}
	return fmt.Sprintf("%s %s: whoever can write there can change %s; "+
		"make it private (chmod go-w, owned by you) or point the cache elsewhere", short(e.Path), e.Reason, stakes)
}

// CheckDir returns an *UnsafeError when dir exists and is writable by its group or by others,
// or is owned by another user than the current one, and a plain error when it is not a
// folder; nil when it is private or does not exist yet (it will be created private) or
// cannot exist (a file on its path). A symlink at dir is followed: its target is checked.
func CheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil // nothing there to read: creating it fails later, costing the cache alone
	}
	if err != nil {
		return shortErr(err)
	}
	if !fi.IsDir() {
		// Not a safety matter: nothing can be cached there at all.
		return fmt.Errorf("%s is %s, not a folder: a cache needs a folder (point the cache at one)", short(dir), KindOf(fi.Mode()))
	}
	return checkInfo(dir, fi, "folder")
}

// CheckFile is CheckDir for an open entry's FileInfo (from Open).
func CheckFile(path string, fi fs.FileInfo) error { return checkInfo(path, fi, "file") }

func checkInfo(path string, fi fs.FileInfo, what string) error {
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		return &UnsafeError{Path: path, Reason: fmt.Sprintf("is a %s writable by group or others (mode %v)", what, fi.Mode())}
	}
	if uid, ok := owner(fi); ok && uid != os.Getuid() {
		return &UnsafeError{Path: path, Reason: fmt.Sprintf("is a %s owned by another user (uid %d; you are uid %d)", what, uid, os.Getuid())}
	}
	return nil
}

// KindOf names a file type in words, with its article ("a folder", "a FIFO"; fs.FileMode's
// String writes a folder as d---------).
func KindOf(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a folder"
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a device"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "mode " + m.Type().String()
}
