package tune

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzTuneEntry writes arbitrary bytes at a key's cache entry and looks the key up: never a
// panic or an error from Tune, a hit only for an entry of that key naming a valid winner,
// and Tune then returns that candidate untimed (or times them all when the winner is none
// of them). Seeded with small valid and damaged entries.
func FuzzTuneEntry(f *testing.F) {
	k := testKey("fuzz")
	valid, err := json.Marshal(entry{Format: entryFormat, Key: k, Winner: "fast", TimesNS: map[string]int64{"fast": 100}, Reps: 5, When: time.Unix(0, 0).UTC()})
	if err != nil {
		f.Fatal(err)
	}
	other := k
	other.Device.Name = "Other GPU"
	otherB, _ := json.Marshal(entry{Format: entryFormat, Key: other, Winner: "fast"})
	for _, seed := range []string{
		string(valid),
		string(valid[:len(valid)/2]), // truncated
		string(otherB),               // another device's
		strings.Replace(string(valid), `"fast"`, `"gone"`, 1),               // a winner no candidate has
		strings.Replace(string(valid), `"winner":"fast"`, `"winner":""`, 1), // no winner
		strings.Replace(string(valid), `100`, `-1`, 1),                      // a negative time
		strings.Replace(string(valid), `100`, `1e400`, 1),                   // out of range
		strings.Replace(string(valid), `100`, `NaN`, 1),
		strings.Replace(string(valid), `kgen-tune 1`, `kgen-tune 2`, 1),
		strings.Replace(string(valid), `"fake"`, `"gemm_sm90"`, 1), // another kernel's
		string(valid) + string(valid),
		`{"format":"kgen-tune 1","extra":1}`,
		"", "null", "[]",
	} {
		f.Add([]byte(seed))
	}
	tu, err := New(f.TempDir(), Schedule{Warmup: 1, Reps: 5})
	if err != nil {
		f.Fatal(err)
	}
	p := tu.Path(k)
	f.Fuzz(func(t *testing.T, raw []byte) {
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		name, ok := tu.Cached(k)
		if ok {
			var e entry
			if err := json.Unmarshal(raw, &e); err != nil || e.Key != k || e.Winner != name || e.Format != entryFormat {
				t.Fatalf("Cached hit %q on an entry that is not k's (%v)", name, err)
			}
			if checkText(name, true) != nil {
				t.Fatalf("Cached hit an invalid winner name %q", name)
			}
		}
		var calls atomic.Int64
		res, err := Tune(context.Background(), tu, k, fakeCands(), fakeTimer(&calls))
		if err != nil {
			t.Fatalf("Tune over a damaged entry: %v", err)
		}
		inCands := false
		for _, c := range fakeCands() {
			inCands = inCands || ok && c.Name == name
		}
		if inCands != res.Cached || res.Cached && (res.Winner.Name != name || calls.Load() != 0) {
			t.Fatalf("Tune: cached %v, winner %q, %d timings; the entry named %q (a hit: %v)", res.Cached, res.Winner.Name, calls.Load(), name, ok)
		}
		if !res.Cached && res.Winner.Name != "fast" {
			t.Fatalf("Tune timed and picked %q; want fast", res.Winner.Name)
		}
	})
}
