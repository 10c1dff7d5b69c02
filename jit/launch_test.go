package jit

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLaunchRanksEnvAndPrefix(t *testing.T) {
	var out syncBuf
	code, err := LaunchRanks(context.Background(), LaunchOptions{
		N: 3, Prog: "sh", Stdout: &out, Stderr: &out,
		Args: []string{"-c", `echo "r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK a=$MASTER_ADDR p=$MASTER_PORT"; printf 'no newline'`},
	})
	if err != nil || code != 0 {
		t.Fatalf("code %d err %v\n%s", code, err, out.String())
	}
	s := out.String()
	for _, want := range []string{"[rank 0] r=0 w=3 l=0 a=127.0.0.1 p=", "[rank 2] r=2 w=3 l=2", "[rank 1] no newline\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

func TestLaunchRanksFailureStopsOthers(t *testing.T) {
	var out syncBuf
	t0 := time.Now()
	code, err := LaunchRanks(context.Background(), LaunchOptions{
		N: 3, Prog: "sh", Stdout: &out, Stderr: &out, Grace: 500 * time.Millisecond,
		Args: []string{"-c", `if [ "$RANK" = 1 ]; then echo boom >&2; exit 3; fi; sleep 30`},
	})
	var re *RankError
	if code != 3 || !errors.As(err, &re) || re.Rank != 1 {
		t.Fatalf("code %d err %v\n%s", code, err, out.String())
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("the other ranks were not stopped: took %v", d)
	}
	if !strings.Contains(out.String(), "[rank 1] boom") {
		t.Fatalf("output: %s", out.String())
	}
}

func TestLaunchRanksIgnoringTERM(t *testing.T) {
	t0 := time.Now()
	code, err := LaunchRanks(context.Background(), LaunchOptions{
		N: 2, Prog: "sh", Stdout: &syncBuf{}, Stderr: &syncBuf{}, Grace: 300 * time.Millisecond,
		Args: []string{"-c", `trap '' TERM; if [ "$RANK" = 0 ]; then exit 7; fi; sleep 30`},
	})
	if code != 7 || err == nil {
		t.Fatalf("code %d err %v", code, err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("SIGKILL did not follow: took %v", d)
	}
}

func TestLaunchRanksMissingProgram(t *testing.T) {
	code, err := LaunchRanks(context.Background(), LaunchOptions{N: 2, Prog: "/nonexistent/prog"})
	if code != 127 || err == nil {
		t.Fatalf("code %d err %v", code, err)
	}
}

func TestLaunchRanksCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	code, err := LaunchRanks(ctx, LaunchOptions{N: 2, Prog: "sleep", Args: []string{"30"}, Grace: 300 * time.Millisecond})
	var re *RankError
	if code != 130 || !errors.As(err, &re) || re.Rank != -1 {
		t.Fatalf("code %d err %v", code, err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
}
