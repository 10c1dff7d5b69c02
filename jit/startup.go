package jit

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kgen-dev/kgen/internal/excerpt"
)

// StartupEnv names the variable that makes every device print, at its first kernel launch,
// one line to stderr saying where the time to that launch went (Device.Startup); `kgen
// launch --startup` sets it for every rank.
const StartupEnv = "KGEN_STARTUP"

// Startup says where a device's time to its first kernel launch went.
type Startup struct {
	// Label names the device: "rank R" (RunRanks' emulated ranks, or $RANK), else "device".
	Label string
	// Open is the time Open/OpenBackend took (driver, context).
	Open time.Duration
	// Init is the time InitNVSHMEM took (bootstrap, host library); zero without NVSHMEM.
	Init time.Duration
	// Link and Load sum the loads' LoadStats (PTX -> cubin, and module load with
	// nvshmemx_cumodule_init) up to the first launch; Loads counts them, CacheHits those
	// that found their cubin in the cache.
	Link, Load       time.Duration
	Loads, CacheHits int
	// FirstLaunch is the time from the start of Open to the return of the first launch
	// (zero until one succeeded); it includes the program's own work in between.
	FirstLaunch time.Duration
}

// String is one line: "rank 0: first launch 1.2s after open (open 80ms, NVSHMEM init
// 650ms, link 59s in 1 load, load 0.3ms)".
func (s Startup) String() string {
	var b strings.Builder
	first := "no launch yet"
	if s.FirstLaunch > 0 {
		first = "first launch " + round(s.FirstLaunch).String() + " after open"
	}
	fmt.Fprintf(&b, "%s: %s (open %s", s.Label, first, round(s.Open))
	if s.Init > 0 {
		fmt.Fprintf(&b, ", NVSHMEM init %s", round(s.Init))
	}
	fmt.Fprintf(&b, ", link %s in %d load(s), %d from the cache, load %s)", round(s.Link), s.Loads, s.CacheHits, round(s.Load))
	return b.String()
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// startup is a device's record (guarded by its mu, except launched).
type startup struct {
	mu       sync.Mutex
	opened   time.Time
	s        Startup
	launched atomic.Bool
}

// Startup returns where the device's time to its first launch went so far.
func (d *Device) Startup() Startup {
	if d == nil {
		return Startup{}
	}
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	s := d.st.s
	s.Label = d.label()
	return s
}

func (d *Device) label() string {
	if ed, ok := d.impl.(*emuDevice); ok && ed.m.w != nil && ed.m.w.ranks {
		return fmt.Sprintf("rank %d", ed.gpu)
	}
	if r := os.Getenv("RANK"); r != "" {
		return "rank " + r
	}
	return "device"
}

func (d *Device) noteOpen(start time.Time) {
	d.st.mu.Lock()
	d.st.opened, d.st.s.Open = start, time.Since(start)
	d.st.mu.Unlock()
}

func (d *Device) noteInit(took time.Duration) {
	d.st.mu.Lock()
	d.st.s.Init += took
	d.st.mu.Unlock()
}

func (d *Device) noteLoad(st LoadStats) {
	if d.st.launched.Load() {
		return
	}
	d.st.mu.Lock()
	d.st.s.Link += st.Link
	d.st.s.Load += st.Load
	d.st.s.Loads++
	if st.CacheHit {
		d.st.s.CacheHits++
	}
	d.st.mu.Unlock()
}

// noteLaunch records the first launch (one atomic load afterwards) and prints the report
// when $KGEN_STARTUP is set.
func (d *Device) noteLaunch() {
	if d.st.launched.Load() || !d.st.launched.CompareAndSwap(false, true) {
		return
	}
	d.st.mu.Lock()
	if !d.st.opened.IsZero() {
		d.st.s.FirstLaunch = time.Since(d.st.opened)
	}
	d.st.mu.Unlock()
	if on, _ := startupEnv(); !on {
		return
	}
	fmt.Fprintf(os.Stderr, "kgen: %s\n", d.Startup())
}

// startupEnv reads $KGEN_STARTUP: on for 1, true, yes or on, off for 0, false, no, off or
// unset (any case, spaces around); another value is an error naming the variable, which
// OpenBackend returns (a typo such as "of" turned the report on, silently).
func startupEnv() (bool, error) {
	switch v := os.Getenv(StartupEnv); strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "off", "false", "no":
		return false, nil
	case "1", "on", "true", "yes":
		return true, nil
	default:
		return false, fmt.Errorf("jit: %s=%s: want 1, true, yes or on (print where the time to the first launch went) or 0, false, no or off", StartupEnv, excerpt.Quote(v))
	}
}
