package jit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProbe9CacheEntries: an entry cut at every length, or with any one
// byte of its header changed, is a miss or the exact data, never a panic or
// other bytes; two goroutines storing different data under one key leave one
// of the two whole, and readers meanwhile see one of the two or none.
func TestProbe9CacheEntries(t *testing.T) {
	c := NewCache(t.TempDir())
	k, _ := cacheKey([]byte("probe9"), nil, "sm_90", 12080)
	data := []byte("the cubin bytes\n\x00\xff")
	if err := c.Put(k, data); err != nil {
		t.Fatal(err)
	}
	p := c.path(k.String())
	whole, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(whole); n++ {
		if err := os.WriteFile(p, whole[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		if b, ok := c.Get(k); ok {
			t.Fatalf("entry cut to %d of %d bytes: served %q", n, len(whole), b)
		}
	}
	for i := 0; i < len(whole)-len(data); i++ {
		for _, x := range []byte{0, '\n', '0', '+', '-', 0xff, whole[i] ^ 1} {
			bad := bytes.Clone(whole)
			bad[i] = x
			if err := os.WriteFile(p, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			if b, ok := c.Get(k); ok && !bytes.Equal(b, data) {
				t.Fatalf("header byte %d set to %q: served %q", i, x, b)
			}
		}
	}
	// Extra bytes after the entry are not served as part of it.
	if err := os.WriteFile(p, append(bytes.Clone(whole), "tail"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, ok := c.Get(k); ok && !bytes.Equal(b, data) {
		t.Fatalf("entry with a tail: served %q", b)
	}

	a, b := bytes.Repeat([]byte("A"), 1<<16), bytes.Repeat([]byte("B"), 1<<17)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	bad := make(chan string, 1)
	for w, v := range [][]byte{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				if err := c.Put(k, v); err != nil {
					select {
					case bad <- fmt.Sprintf("writer %d: %v", w, err):
					default:
					}
					return
				}
			}
		}()
	}
	var rg sync.WaitGroup
	rg.Add(1)
	go func() {
		defer rg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if got, ok := c.Get(k); ok && !bytes.Equal(got, a) && !bytes.Equal(got, b) && !bytes.Equal(got, data) {
				select {
				case bad <- fmt.Sprintf("reader saw %d bytes, neither entry", len(got)):
				default:
				}
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	rg.Wait()
	select {
	case msg := <-bad:
		t.Fatal(msg)
	default:
	}
	got, ok := c.Get(k)
	if !ok || !bytes.Equal(got, a) && !bytes.Equal(got, b) {
		t.Fatalf("after two writers: %d bytes, %v", len(got), ok)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestProbe9CaptureMisuse: capture on a closed stream, a stream closed or its
// device closed while capturing, two streams capturing at once, another
// stream launching during a capture, EndCapture twice and a graph replayed
// on a closed stream all return an error or work, promptly, never panic.
func TestProbe9CaptureMisuse(t *testing.T) {
	d, fn, buf := emuBump(t)
	launch := func(s *Stream, delta uint32) error {
		return fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(4), Stream: s}, buf, uint32(4), delta)
	}
	read := func() []uint32 {
		h := make([]uint32, 4)
		if err := buf.CopyToHost(h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	within := func(what string, f func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- fmt.Errorf("panic: %v", p)
				}
			}()
			done <- f()
		}()
		select {
		case err := <-done:
			if err != nil && strings.HasPrefix(err.Error(), "panic") {
				t.Fatalf("%s: %v", what, err)
			}
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer in 10 s", what)
			return nil
		}
	}

	// A closed stream cannot begin a capture.
	s0, _ := d.NewStream()
	if err := s0.Close(); err != nil {
		t.Fatal(err)
	}
	if err := within("BeginCapture on a closed stream", s0.BeginCapture); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("BeginCapture on a closed stream: %v; want an error saying closed", err)
	}

	// Two streams capturing at once, with a third launching for real between.
	s1, _ := d.NewStream()
	s2, _ := d.NewStream()
	s3, _ := d.NewStream()
	if err := s1.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := s2.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := launch(s1, 1); err != nil {
		t.Fatal(err)
	}
	if err := launch(s2, 10); err != nil {
		t.Fatal(err)
	}
	if err := launch(s3, 100); err != nil {
		t.Fatalf("a launch on a stream not capturing during another's capture: %v", err)
	}
	if err := s3.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if h := read(); h[0] != 100 {
		t.Fatalf("after the uncaptured launch: %v, want 100s (captured launches ran?)", h)
	}
	g1, err := s1.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	if err := within("EndCapture twice", func() error { _, err := s1.EndCapture(); return err }); err == nil {
		t.Error("EndCapture twice: no error")
	}
	g2, err := s2.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	x1, err := g1.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	x2, err := g2.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	if err := x1.Launch(s3); err != nil {
		t.Fatal(err)
	}
	if err := x2.Launch(s3); err != nil {
		t.Fatal(err)
	}
	if err := s3.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if h := read(); h[3] != 111 {
		t.Fatalf("after replaying both graphs: %v, want 111s", h)
	}
	// A graph replayed on a closed stream.
	if err := s3.Close(); err != nil {
		t.Fatal(err)
	}
	if err := within("graph launch on a closed stream", func() error { return x1.Launch(s3) }); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("graph launch on a closed stream: %v; want an error saying closed", err)
	}

	// A stream closed while capturing: EndCapture then fails or returns a graph; later use fails.
	s4, _ := d.NewStream()
	if err := s4.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := launch(s4, 1000); err != nil {
		t.Fatal(err)
	}
	cerr := within("Close while capturing", s4.Close)
	_, eerr := s4.EndCapture()
	if cerr == nil && eerr == nil {
		t.Error("a stream closed while capturing ended its capture without error")
	}
	if err := launch(s4, 1); err == nil && cerr == nil {
		t.Error("launch on a stream closed while capturing: no error")
	}
	if h := read(); h[0] != 111 {
		t.Fatalf("after the abandoned capture: %v, want 111s (its launch ran?)", h)
	}

	// The device closed while a stream captures.
	d2, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	s5, _ := d2.NewStream()
	if err := s5.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	within("Device.Close while capturing", d2.Close)
	if err := within("EndCapture after Device.Close", func() error { _, err := s5.EndCapture(); return err }); err == nil {
		t.Error("EndCapture after Device.Close: no error")
	}
}
