package devlib

import (
	"fmt"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"strconv"
	"strings"
)

// VersionMismatchError reports devlib PTX built from one NVSHMEM version paired with another.
type VersionMismatchError struct {
	Built string // the NVSHMEM version the devlib PTX came from
	Host  string // the NVSHMEM version it was to run with
}

// Error names both versions and says how to rebuild.
func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("devlib: the device library was built from NVSHMEM %s but NVSHMEM %s is in use; "+
		"the device state layout differs between versions, so rebuild it from %s's libnvshmem_device.bc "+
		"(kgen devlib, with NVSHMEM_HOME pointing at that installation)", excerpt.Cut(e.Built, excerpt.Max), excerpt.Cut(e.Host, excerpt.Max), excerpt.Cut(e.Host, excerpt.Max))
}

// ParseVersion parses "3.4.5" (also "v3.4.5" and "3.4.5.0", whose fourth part, the package
// version, is ignored) into major, minor and patch.
func ParseVersion(v string) ([3]int, error) {
	var out [3]int
	s := strings.TrimPrefix(strings.TrimSpace(v), "v")
	parts := strings.Split(s, ".")
	if len(parts) < 3 || len(parts) > 4 {
		return out, fmt.Errorf("devlib: bad NVSHMEM version %s (want major.minor.patch, like 3.4.5)", excerpt.Quote(v))
	}
	for i, p := range parts {
		// Digits only, at most 10 of them (an i32): Atoi took "3.4.+5" and "3.4.-0" for 3.4.5 and
		// 3.4.0, and a part of 100000 zeros and a 5 for 5 (a mismatch then quoted it whole).
		if p == "" || len(p) > 10 || strings.Trim(p, "0123456789") != "" {
			return out, fmt.Errorf("devlib: bad NVSHMEM version %s: part %d is not 1 to 10 decimal digits (want major.minor.patch, like 3.4.5)", excerpt.Quote(v), i+1)
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return out, fmt.Errorf("devlib: bad NVSHMEM version %s (want major.minor.patch, like 3.4.5)", excerpt.Quote(v))
		}
		if i < 3 {
			out[i] = n
		}
	}
	return out, nil
}

// CheckVersion returns nil when devlib PTX built from NVSHMEM version built may be linked
// and run with NVSHMEM version host: the major, minor and patch versions must be equal. It
// returns a *VersionMismatchError otherwise, or an error naming an unparsable version.
func CheckVersion(built, host string) error {
	b, err := ParseVersion(built)
	if err != nil {
		return err
	}
	h, err := ParseVersion(host)
	if err != nil {
		return err
	}
	if b != h {
		return &VersionMismatchError{Built: built, Host: host}
	}
	return nil
}

// CheckPTX reads the header of devlib PTX and checks its NVSHMEM version against host.
func CheckPTX(ptx []byte, host string) error {
	h, err := ParseHeader(ptx)
	if err != nil {
		return err
	}
	return CheckVersion(h.NVSHMEM, host)
}
