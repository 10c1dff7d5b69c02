package devlib

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe18CacheEnv: $KGEN_CACHE is read as package jit reads it: " off" (spaces around
// it) turns this cache off too (it turned jit's off and kept this one on), and a value of no
// known form ("of", "disable") is refused naming the variable before any tool runs (it kept
// the cache on, silently, where jit.Open refuses it); probe 18.
func TestProbe18CacheEnv(t *testing.T) {
	for _, c := range []struct {
		env      string
		disabled bool
		want     string // Build's error; "" for none from the cache check
	}{
		{env: " off ", disabled: true},
		{env: "OFF\n", disabled: true},
		{env: "on"},
		{env: "", disabled: false},
		{env: "of", want: `devlib cache: KGEN_CACHE="of": want off, 0, false or no`},
		{env: "disable", want: `KGEN_CACHE="disable"`},
	} {
		const missing = "/nonexistent/libnvshmem_device.bc"
		t.Setenv("KGEN_CACHE", c.env)
		t.Setenv("KGEN_DEVLIB_CACHE", t.TempDir())
		if got := CacheDisabled(); got != c.disabled {
			t.Errorf("KGEN_CACHE=%q: CacheDisabled() = %v; want %v", c.env, got, c.disabled)
		}
		if l := (&Library{}); (l.cacheDir() == "") != c.disabled {
			t.Errorf("KGEN_CACHE=%q: cache folder %q; want none: %v", c.env, l.cacheDir(), c.disabled)
		}
		_, err := (&Library{Path: missing}).Build(context.Background(), ptx.SM90, []string{"nvshmem_my_pe"})
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("KGEN_CACHE=%q: Build: %v; want an error holding %q", c.env, err, c.want)
			}
		} else if err != nil && strings.Contains(err.Error(), "KGEN_CACHE=") {
			t.Errorf("KGEN_CACHE=%q: Build: %v; want no complaint about KGEN_CACHE", c.env, err)
		}
		// An explicit folder or NoCache does not consult KGEN_CACHE.
		if _, err := (&Library{Path: missing, NoCache: true}).Build(context.Background(), ptx.SM90, []string{"nvshmem_my_pe"}); err != nil && strings.Contains(err.Error(), "KGEN_CACHE=") {
			t.Errorf("KGEN_CACHE=%q, NoCache: Build: %v; want no complaint about KGEN_CACHE", c.env, err)
		}
	}
}

// TestProbe18NoLibrary: every method of a nil *Library or given a nil context is an error
// naming the method (a nil *Library panicked in Build, BuildEach, Signatures and
// SignaturesOf), and one made by hand without a bitcode (Path "") says so where it needs
// the bitcode (it ran llvm-nm on a.out and llvm-dis on stdin: "llvm-nm-19 --defined-only
// : exit status 1 ... a.out: No such file"); probe 18.
func TestProbe18NoLibrary(t *testing.T) {
	t.Setenv("KGEN_DEVLIB_CACHE", t.TempDir())
	methods := []struct {
		name string
		call func(l *Library, ctx context.Context) error
	}{
		{"Build", func(l *Library, ctx context.Context) error {
			_, err := l.Build(ctx, ptx.SM90, []string{"nvshmem_my_pe"})
			return err
		}},
		{"BuildEach", func(l *Library, ctx context.Context) error {
			_, err := l.BuildEach(ctx, ptx.SM90, []string{"nvshmem_my_pe"}, EachOptions{})
			return err
		}},
		{"Signatures", func(l *Library, ctx context.Context) error { _, err := l.Signatures(ctx); return err }},
		{"SignaturesOf", func(l *Library, ctx context.Context) error {
			_, err := l.SignaturesOf(ctx, []string{"nvshmem_my_pe"})
			return err
		}},
		{"BitcodeVersion", func(l *Library, ctx context.Context) error { _, err := l.BitcodeVersion(ctx); return err }},
		{"Functions", func(l *Library, ctx context.Context) error { _, err := l.Functions(ctx); return err }},
	}
	for _, c := range []struct {
		what string
		l    *Library
		ctx  context.Context
		want string // after "devlib: <method>"
	}{
		{"nil", nil, context.Background(), " of a nil *Library (make one with Open)"},
		{"zero", &Library{}, context.Background(), ""},
		{"nil context", &Library{Path: "/nonexistent/libnvshmem_device.bc"}, nil, ": nil context"},
	} {
		for _, m := range methods {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				err = m.call(c.l, c.ctx)
			}()
			want := "devlib: " + m.name + c.want
			if c.want == "" {
				want = "devlib: the Library has no bitcode (Path is empty; make one with Open)"
			}
			if err == nil || err.Error() != want {
				t.Errorf("%s Library: %s: %v; want %q", c.what, m.name, err, want)
			}
		}
	}
}
