package jit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCacheEntry writes arbitrary bytes at a cache entry's path and reads it back with
// Cache.Get: never a panic, and a hit only for bytes that decode as that key's entry, with
// the data they checksum. Seeded with small valid and damaged entries.
func FuzzCacheEntry(f *testing.F) {
	k := CacheKey{Arch: "sm_90", Driver: 12040}
	key := k.String()
	valid := encodeEntry(key, []byte("cubin"))
	sum := sha256.Sum256([]byte("cubin"))
	hexSum := hex.EncodeToString(sum[:])
	for _, seed := range [][]byte{
		valid,
		encodeEntry(key, nil),
		valid[:len(valid)-1],                  // truncated
		append(bytes.Clone(valid), 'x'),       // a byte past its length
		encodeEntry(CacheKey{}.String(), nil), // another key's
		[]byte(cacheMagic + key + "\n" + hexSum + "\n-5\ncubin"),
		[]byte(cacheMagic + key + "\n" + hexSum + "\n99999999999999999999999\ncubin"),
		[]byte(cacheMagic + key + "\n" + hexSum + "\n+5\ncubin"),
		[]byte(cacheMagic + key + "\n" + hexSum + "\n"),
		[]byte(cacheMagic),
		{},
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		f.Fatal(err)
	}
	c := NewCache(dir)
	p := c.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.Fatal(err)
	}
	if got, ok := func() ([]byte, bool) {
		if err := os.WriteFile(p, valid, 0o644); err != nil {
			f.Fatal(err)
		}
		return c.Get(k)
	}(); !ok || string(got) != "cubin" {
		f.Fatalf("Get of a valid entry = %q, %v; want the data", got, ok)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		dec, decOK := decodeEntry(key, raw)
		if decOK {
			s := sha256.Sum256(dec)
			if !bytes.Contains(raw, []byte(hex.EncodeToString(s[:]))) {
				t.Fatalf("decodeEntry accepted data whose checksum its header does not hold")
			}
		}
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		got, ok := c.Get(k)
		if ok && (!decOK || !bytes.Equal(got, dec)) {
			t.Fatalf("Get hit (%d bytes) on bytes decodeEntry refuses (%v) or decodes otherwise", len(got), decOK)
		}
		if decOK && len(raw) <= entryHeadMax+len(dec) && !ok {
			t.Fatalf("Get missed an entry that decodes with a header of at most %d bytes", entryHeadMax)
		}
	})
}
