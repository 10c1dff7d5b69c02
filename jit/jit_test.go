package jit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// fake is a host-memory backend that checks the front end without a GPU: a launch of
// vector_add really adds (f32), so the API's whole path runs.
type fake struct {
	mu    sync.Mutex
	next  DevicePtr
	mem   map[DevicePtr][]byte
	loads int
}

func (f *fake) info() Info { return Info{Backend: GPU, Name: "fake", Arch: "sm_90", SM: 90} }
func (f *fake) load(req *loadRequest, c *Cache) (module, LoadStats, error) {
	key, _ := cacheKey(req.ptx, req.devlib, "sm_90", 1)
	img, hit, err := cachedLink(c, key, func() ([]byte, error) {
		f.mu.Lock()
		f.loads++
		f.mu.Unlock()
		return append([]byte("cubin:"), req.ptx...), nil
	})
	return &fakeModule{f: f, name: req.name}, LoadStats{CacheHit: hit, CubinLen: len(img)}, err
}
func (f *fake) alloc(n int64) (DevicePtr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next += 1 << 20
	f.mem[f.next] = make([]byte, n)
	return f.next, nil
}
func (f *fake) free(p DevicePtr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.mem[p]; !ok {
		return fmt.Errorf("double free of %#x", p)
	}
	delete(f.mem, p)
	return nil
}
func (f *fake) at(p DevicePtr, n int64) []byte {
	for base, b := range f.mem {
		if p >= base && int64(p-base)+n <= int64(len(b)) {
			return b[p-base : int64(p-base)+n]
		}
	}
	panic(fmt.Sprintf("fake: bad address %#x+%d", p, n))
}
func (f *fake) copyHtoD(dst DevicePtr, src []byte, s stream) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	copy(f.at(dst, int64(len(src))), src)
	return nil
}
func (f *fake) copyDtoH(dst []byte, src DevicePtr, s stream) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	copy(dst, f.at(src, int64(len(dst))))
	return nil
}
func (f *fake) copyDtoD(dst, src DevicePtr, n int64, s stream) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	copy(f.at(dst, n), f.at(src, n))
	return nil
}
func (f *fake) newStream() (stream, error) { return fakeStream{}, nil }
func (f *fake) newEvent() (event, error)   { return &fakeEvent{}, nil }
func (f *fake) synchronize() error         { return nil }
func (f *fake) close() error               { return nil }

type fakeModule struct {
	f    *fake
	name string
}

func (m *fakeModule) function(name string) (function, error) { return &fakeFunc{m.f}, nil }
func (m *fakeModule) unload() error                          { return nil }

type fakeFunc struct{ f *fake }

// launch implements vector_add_f32(a, b, c, n) on the host.
func (k *fakeFunc) launch(g, b Dim3, shared int, s stream, args []uint64) error {
	k.f.mu.Lock()
	defer k.f.mu.Unlock()
	n := int64(args[3])
	a, bb, c := k.f.at(DevicePtr(args[0]), 4*n), k.f.at(DevicePtr(args[1]), 4*n), k.f.at(DevicePtr(args[2]), 4*n)
	for i := int64(0); i < n && i < int64(g.X*b.X); i++ {
		x := math.Float32frombits(le32(a[4*i:])) + math.Float32frombits(le32(bb[4*i:]))
		put32(c[4*i:], math.Float32bits(x))
	}
	return nil
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
func put32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

type fakeStream struct{}

func (fakeStream) synchronize() error    { return nil }
func (fakeStream) waitEvent(event) error { return nil }
func (fakeStream) destroy() error        { return nil }

func (fakeStream) waitValue32(DevicePtr, uint32, WaitCond) error { return nil }
func (fakeStream) writeValue32(DevicePtr, uint32) error          { return nil }

type fakeEvent struct{ t time.Time }

func (e *fakeEvent) record(s stream) error { e.t = time.Now(); return nil }
func (e *fakeEvent) synchronize() error    { return nil }
func (e *fakeEvent) destroy() error        { return nil }
func (e *fakeEvent) elapsed(end event) (time.Duration, error) {
	return end.(*fakeEvent).t.Sub(e.t), nil
}

func init() {
	registerBackend("fake", func(int) (device, error) { return &fake{mem: map[DevicePtr][]byte{}}, nil })
}

func vectorAdd(t *testing.T) *ptx.Module {
	t.Helper()
	spec, err := kernels.Lookup("vector_add")
	if err != nil {
		t.Fatal(err)
	}
	m, err := spec.Build(kernels.Config{Target: ptx.SM90, DType: dsl.F32})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFrontEndVectorAdd(t *testing.T) {
	cache := NewCache(t.TempDir())
	d, err := OpenBackend("fake", 0, WithCache(cache))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src := Source{Module: vectorAdd(t)}
	m, err := d.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	if m.Stats().CacheHit {
		t.Fatal("first load hit the cache")
	}
	m2, err := d.Load(src)
	if err != nil || !m2.Stats().CacheHit {
		t.Fatalf("second load: hit=%v err=%v", m2.Stats().CacheHit, err)
	}
	if _, err := m.Function("nope"); err == nil || !strings.Contains(err.Error(), "vector_add_f32") {
		t.Fatalf("unknown kernel error should list the kernels: %v", err)
	}
	fn, err := m.Function("vector_add_f32")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = float32(i), float32(2*i)
	}
	bufs := make([]*Buffer[float32], 3)
	for i := range bufs {
		if bufs[i], err = Alloc[float32](d, n); err != nil {
			t.Fatal(err)
		}
		defer bufs[i].Free()
	}
	if err := bufs[0].CopyFromHost(a); err != nil {
		t.Fatal(err)
	}
	if err := bufs[1].CopyFromHost(b); err != nil {
		t.Fatal(err)
	}
	cfg := LaunchConfig{Grid: D1((n + 255) / 256), Block: D1(256)}
	if err := fn.Launch(cfg, bufs[0], bufs[1], bufs[2], uint32(n)); err != nil {
		t.Fatal(err)
	}
	if err := bufs[2].CopyToHost(c); err != nil {
		t.Fatal(err)
	}
	for i := range c {
		if c[i] != a[i]+b[i] {
			t.Fatalf("c[%d] = %v, want %v", i, c[i], a[i]+b[i])
		}
	}
	// Wrong arguments are errors that say what the kernel wants.
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{bufs[0], bufs[1], bufs[2]}, "takes 4 arguments, got 3"},
		{[]any{bufs[0], bufs[1], bufs[2], n}, "int, whose size depends on the platform"},
		{[]any{bufs[0], bufs[1], bufs[2], uint64(n)}, "8 bytes), the parameter is 4 bytes"},
		{[]any{bufs[0], bufs[1], bufs[2], float32(n)}, "float32 for a .u32 parameter"},
		{[]any{bufs[0], uint32(1), bufs[2], uint32(n)}, "uint32 (4 bytes), the parameter is 8 bytes"},
	} {
		err := fn.Launch(cfg, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Launch(%v): got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	var nilBuf *Buffer[float32]
	if err := fn.Launch(cfg, nilBuf, bufs[1], bufs[2], uint32(n)); err == nil || !strings.Contains(err.Error(), "nil *jit.Buffer[float32]") {
		t.Errorf("nil buffer: %v", err)
	}
	freed, _ := Alloc[float32](d, 4)
	freed.Free()
	if err := fn.Launch(cfg, freed, bufs[1], bufs[2], uint32(n)); err == nil || !strings.Contains(err.Error(), "was freed") {
		t.Errorf("freed buffer: %v", err)
	}
	if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(2048)}, bufs[0], bufs[1], bufs[2], uint32(n)); err == nil {
		t.Error("a 2048-thread block was accepted")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fn.Launch(cfg, bufs[0], bufs[1], bufs[2], uint32(n)); err == nil {
		t.Error("launch after Close was accepted")
	}
}

// TestWideParameters: a byte array wider than 8 bytes takes a []byte of its size in
// consecutive words, a number is refused, and so is a wide parameter that is not bytes or a
// kernel of more than MaxParamBytes.
func TestWideParameters(t *testing.T) {
	f := &ptx.Func{Name: "k", Entry: true, Params: []ptx.Param{{Name: "a", Type: ptx.U32}, {Name: "s", Type: ptx.B8, Array: 12, Align: 8}, {Name: "b", Type: ptx.U16}}}
	_, err := EncodeArgs(f, []any{uint32(0), uint64(1), uint16(0)})
	if err == nil || !strings.Contains(err.Error(), "argument 1 (.b8 s[12]): got uint64 for a 12-byte array parameter") {
		t.Fatalf("got %v", err)
	}
	words, err := EncodeArgs(f, []any{uint32(7), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, uint16(9)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{7, 0x0807060504030201, 0x0c0b0a09, 9}; fmt.Sprint(words) != fmt.Sprint(want) {
		t.Fatalf("words %x, want %x", words, want)
	}
	if _, err := EncodeArgs(&ptx.Func{Name: "k", Params: []ptx.Param{{Name: "v", Type: ptx.U32, Array: 4}}}, []any{make([]byte, 16)}); err == nil || !strings.Contains(err.Error(), "not a byte array") {
		t.Fatalf("a u32 array: %v", err)
	}
	if _, err := EncodeArgs(&ptx.Func{Name: "k", Params: []ptx.Param{{Name: "v", Type: ptx.B8, Array: 5000}}}, []any{make([]byte, 5000)}); err == nil || !strings.Contains(err.Error(), "takes 5000 bytes of parameters, more than the 4096") {
		t.Fatalf("5000 bytes of parameters: %v", err)
	}
	f = &ptx.Func{Name: "k", Entry: true, Params: []ptx.Param{{Name: "h", Type: ptx.F16}, {Name: "x", Type: ptx.F64}, {Name: "p", Type: ptx.B64}}}
	slots, err := EncodeArgs(f, []any{uint16(0x3c00), 1.5, DevicePtr(0x1000)})
	if err != nil {
		t.Fatal(err)
	}
	if slots[0] != 0x3c00 || slots[1] != math.Float64bits(1.5) || slots[2] != 0x1000 {
		t.Fatalf("slots %x", slots)
	}
}

func TestNVSHMEMModuleNeedsDevLibAndInit(t *testing.T) {
	d, err := OpenBackend("fake", 0, WithCache(nil))
	if err != nil {
		t.Fatal(err)
	}
	m := &ptx.Module{Target: ptx.SM90, Funcs: []*ptx.Func{
		{Name: "nvshmemx_putmem_block", Extern: true, Params: []ptx.Param{{Name: "a", Type: ptx.B64}}},
		{Name: "k", Entry: true, Visible: true},
	}}
	_, err = d.Load(Source{Module: m, PTX: []byte("//")})
	if err == nil || !strings.Contains(err.Error(), "DevLib is nil") {
		t.Fatalf("got %v", err)
	}
	_, err = d.Load(Source{Module: m, PTX: []byte("//"), DevLib: &DevLib{PTX: []byte("x")}})
	if err == nil || !strings.Contains(err.Error(), "InitNVSHMEM") {
		t.Fatalf("got %v", err)
	}
}

func TestGPUBackendError(t *testing.T) {
	if cudaTagged {
		t.Skip("built with the cuda tag")
	}
	_, err := OpenBackend(GPU, 0)
	if !errors.Is(err, ErrNoCUDA) || !strings.Contains(err.Error(), "rebuild with -tags cuda") {
		t.Fatalf("got %v", err)
	}
	t.Setenv("KGEN_BACKEND", "cuda")
	if _, err := Open(0); !errors.Is(err, ErrNoCUDA) {
		t.Fatalf("Open with KGEN_BACKEND=cuda: %v", err)
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := NewCache(t.TempDir())
	keys := make([]CacheKey, 8)
	for i := range keys {
		keys[i], _ = cacheKey([]byte(fmt.Sprintf("ptx %d", i)), nil, "sm_90", 13000)
	}
	val := func(i int) []byte { return []byte(strings.Repeat(fmt.Sprintf("cubin %d;", i), 5000)) }
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for it := 0; it < 50; it++ {
				i := (g + it) % len(keys)
				if b, ok := c.Get(keys[i]); ok && string(b) != string(val(i)) {
					errs <- fmt.Errorf("goroutine %d read a wrong entry for key %d", g, i)
					return
				}
				if err := c.Put(keys[i], val(i)); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if c.Len() != len(keys) {
		t.Fatalf("Len = %d, want %d", c.Len(), len(keys))
	}
	// A damaged entry is a miss, not an error.
	p := c.path(keys[0].String())
	if err := os.WriteFile(p, []byte(cacheMagic+"garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(keys[0]); ok {
		t.Fatal("damaged entry was returned")
	}
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 0 {
		t.Fatalf("after Clear, Len = %d", c.Len())
	}
}

func TestCacheKeyAndEnv(t *testing.T) {
	a, _ := cacheKey([]byte("x"), nil, "sm_90", 13000)
	for _, b := range []CacheKey{
		func() CacheKey { k, _ := cacheKey([]byte("y"), nil, "sm_90", 13000); return k }(),
		func() CacheKey { k, _ := cacheKey([]byte("x"), nil, "sm_100a", 13000); return k }(),
		func() CacheKey { k, _ := cacheKey([]byte("x"), nil, "sm_90", 12080); return k }(),
		func() CacheKey {
			k, _ := cacheKey([]byte("x"), &DevLib{PTX: []byte("d"), Version: "3.4.5"}, "sm_90", 13000)
			return k
		}(),
	} {
		if a.String() == b.String() {
			t.Fatalf("keys collide: %+v %+v", a, b)
		}
	}
	ar := filepath.Join(t.TempDir(), "lib.a")
	os.WriteFile(ar, []byte("one"), 0o644)
	k1, err := cacheKey([]byte("x"), &DevLib{PTX: []byte("d"), Archive: ar}, "sm_90", 1)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(ar, []byte("two!"), 0o644)
	k2, _ := cacheKey([]byte("x"), &DevLib{PTX: []byte("d"), Archive: ar}, "sm_90", 1)
	if k1.String() == k2.String() {
		t.Fatal("changing the archive did not change the key")
	}
	t.Setenv("KGEN_CACHE", "off")
	if DefaultCache().Enabled() {
		t.Fatal("KGEN_CACHE=off did not disable the cache")
	}
	t.Setenv("KGEN_CACHE", "")
	t.Setenv("KGEN_CACHE_DIR", "/tmp/x")
	if DefaultCacheDir() != "/tmp/x" || !DefaultCache().Enabled() {
		t.Fatal("KGEN_CACHE_DIR ignored")
	}
}

func TestExchangeUniqueID(t *testing.T) {
	port, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const n = 4
	uid := []byte(strings.Repeat("u", 128))
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var mine []byte
			if r == 0 {
				mine = uid
			}
			got[r], errs[r] = ExchangeUniqueID(ctx, Rendezvous{Rank: r, WorldSize: n, Addr: addr}, mine)
		}(n - 1 - r) // clients first: they must retry until rank 0 listens
	}
	wg.Wait()
	for r := 0; r < n; r++ {
		if errs[r] != nil || string(got[r]) != string(uid) {
			t.Fatalf("rank %d: %v (%d bytes)", r, errs[r], len(got[r]))
		}
	}
}

func TestExchangeUniqueIDDeadRank(t *testing.T) {
	port, _ := freePort("127.0.0.1")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	// Rank 0 of 3 with only rank 1 alive: rank 0 must fail naming rank 2.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ExchangeUniqueID(ctx, Rendezvous{Rank: 1, WorldSize: 3, Addr: addr}, nil)
	}()
	_, err := ExchangeUniqueID(ctx, Rendezvous{Rank: 0, WorldSize: 3, Addr: addr}, []byte("uid"))
	wg.Wait()
	if err == nil || !strings.Contains(err.Error(), "ranks [2] did not connect") {
		t.Fatalf("got %v", err)
	}
	// A rank whose rank 0 never comes fails too.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	_, err = ExchangeUniqueID(ctx2, Rendezvous{Rank: 1, WorldSize: 2, Addr: addr}, nil)
	if err == nil || !strings.Contains(err.Error(), "rank 0 did not serve") {
		t.Fatalf("got %v", err)
	}
	if time.Since(t0) > 5*time.Second {
		t.Fatalf("took %v", time.Since(t0))
	}
}

func TestRendezvousFromEnv(t *testing.T) {
	for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "KGEN_BOOTSTRAP_PORT", "TORCHELASTIC_USE_AGENT_STORE"} {
		t.Setenv(k, "")
	}
	rv, err := RendezvousFromEnv()
	if err != nil || rv.WorldSize != 1 {
		t.Fatalf("%+v %v", rv, err)
	}
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "2")
	if _, err := RendezvousFromEnv(); err == nil || !strings.Contains(err.Error(), "MASTER_ADDR") {
		t.Fatalf("got %v", err)
	}
	t.Setenv("MASTER_ADDR", "10.0.0.1")
	t.Setenv("MASTER_PORT", "29500")
	t.Setenv("LOCAL_RANK", "1")
	rv, err = RendezvousFromEnv()
	if err != nil || rv.Addr != "10.0.0.1:29500" || rv.LocalRank != 1 {
		t.Fatalf("%+v %v", rv, err)
	}
	t.Setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
	if rv, _ = RendezvousFromEnv(); rv.Addr != "10.0.0.1:29501" {
		t.Fatalf("under torchrun's agent: %s", rv.Addr)
	}
	t.Setenv("KGEN_BOOTSTRAP_PORT", "40000")
	if rv, _ = RendezvousFromEnv(); rv.Addr != "10.0.0.1:40000" {
		t.Fatalf("KGEN_BOOTSTRAP_PORT: %s", rv.Addr)
	}
}
