package cachefile

import (
	"fmt"
	"os"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
)

// Disabled reports whether $KGEN_CACHE turns kgen's default caches off: "off", "0", "false"
// or "no", in any case, spaces around it ignored.
func Disabled() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("KGEN_CACHE"))) {
	case "off", "0", "false", "no":
		return true
	}
	return false
}

// EnvErr reports a $KGEN_CACHE that is neither an off switch (Disabled) nor an on one (on, 1,
// true, yes): a typo such as "of" would keep a cache on, silently. The error starts with
// prefix and says what turning it off means (noCache).
func EnvErr(prefix, noCache string) error {
	v := os.Getenv("KGEN_CACHE")
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "off", "0", "false", "no", "on", "1", "true", "yes":
		return nil
	}
	return fmt.Errorf("%s: KGEN_CACHE=%s: want off, 0, false or no (%s) or on, 1, true or yes", prefix, excerpt.Quote(v), noCache)
}
