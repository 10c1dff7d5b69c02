package dsl

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestLayoutCacheBounded: a per-layout cache (MakeGMMAOperand's, MakeTMACopy's) holds at
// most maxLayoutCache entries however many layouts a process builds (it grew without bound;
// noted by probe 17).
func TestLayoutCacheBounded(t *testing.T) {
	var m sync.Map
	var n atomic.Int64
	for i := range 3*maxLayoutCache + 7 {
		layoutCacheStore(&m, &n, fmt.Sprint(i), i)
	}
	held := 0
	m.Range(func(any, any) bool { held++; return true })
	if held > maxLayoutCache || held == 0 {
		t.Fatalf("%d entries held after %d stores; want 1..%d", held, 3*maxLayoutCache+7, maxLayoutCache)
	}
	if v, ok := m.Load(fmt.Sprint(3*maxLayoutCache + 6)); !ok || v != 3*maxLayoutCache+6 {
		t.Fatalf("the last entry stored is missing: %v %v", v, ok)
	}
}
