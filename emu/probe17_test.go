package emu

import (
	"strings"
	"testing"
	"time"
)

// TestProbe17EndlessActions: an action that schedules itself again without end is an error
// after MaxActions, naming it, in RunScheduled and in a launch; both hung for ever (a launch
// ran the actions due at one logical time in a loop no step count bounded). Probe 17.
func TestProbe17EndlessActions(t *testing.T) {
	m := asm(t, `
.visible .entry k(.param .u64 a)
{
	ret;
}`)
	for _, c := range []struct {
		what  string
		delay int64 // when the action schedules itself again, after now
		run   func(s *System) error
		want  string
	}{
		{"RunScheduled, later", 1, func(s *System) error { return s.RunScheduled() }, "RunScheduled: 1048577 actions ran and 1 more are scheduled"},
		{"RunScheduled, now", 0, func(s *System) error { return s.RunScheduled() }, "RunScheduled: 1048577 actions ran"},
		{"Launch, now", 0, func(s *System) error {
			return s.Launch(Launch{Module: m, Entry: "k", Grid: D1(1), Block: D1(1), Args: []any{uint64(0)}})
		}, "1048577 actions ran at time"},
	} {
		s, err := New(1)
		if err != nil {
			t.Fatal(err)
		}
		var f Action
		f = func(d *Delivery) error { s.At(d.Now()+c.delay, f); return nil }
		s.At(0, f)
		done := make(chan error, 1)
		go func() { done <- c.run(s) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v; want an error holding %q", c.what, err, c.want)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: still running after 60 s", c.what)
		}
	}
	// A backlog of more than MaxActions actions, scheduled before, runs whole.
	s, _ := New(1)
	ran := 0
	for i := 0; i < MaxActions+10; i++ {
		s.At(int64(i%3), func(*Delivery) error { ran++; return nil })
	}
	if err := s.RunScheduled(); err != nil || ran != MaxActions+10 {
		t.Errorf("a backlog of %d actions: %v, ran %d", MaxActions+10, err, ran)
	}
	// A chain that ends runs whole.
	s, _ = New(1)
	n := 0
	var f Action
	f = func(d *Delivery) error {
		if n++; n < 1000 {
			s.At(d.Now()+1, f)
		}
		return nil
	}
	s.At(0, f)
	if err := s.RunScheduled(); err != nil || n != 1000 || s.Now() != 999 {
		t.Errorf("a chain of 1000: %v, ran %d, now %d", err, n, s.Now())
	}
}
