package jit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rendezvous says who a process is among its peers and where rank 0 serves the bootstrap.
type Rendezvous struct {
	Rank, WorldSize, LocalRank int
	// Addr is host:port where rank 0 listens for the unique-ID exchange.
	Addr string
}

// rangeNote is what an integer's error adds where strconv refused its digits as out of
// range: such a value is an integer, only too large for an int.
func rangeNote(err error) string {
	if errors.Is(err, strconv.ErrRange) {
		return " (out of an int's range)"
	}
	return ""
}

// RendezvousFromEnv reads torchrun's environment: RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. With neither RANK nor WORLD_SIZE set it returns
// a single process (rank 0 of 1). Without LOCAL_RANK the ranks are taken to fill nodes of
// LOCAL_WORLD_SIZE in rank order (torchrun's and Slurm's block layout), so LocalRank is
// RANK mod LOCAL_WORLD_SIZE, or RANK when LOCAL_WORLD_SIZE is unset too (one node). The
// bootstrap listens on MASTER_PORT, or on $KGEN_BOOTSTRAP_PORT when set, or on MASTER_PORT+1
// under torchrun's elastic agent (TORCHELASTIC_USE_AGENT_STORE=True), whose store holds
// MASTER_PORT.
func RendezvousFromEnv() (Rendezvous, error) {
	get := func(k string) (int, bool, error) {
		v, ok := os.LookupEnv(k)
		if !ok || v == "" {
			return 0, false, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, true, fmt.Errorf("jit: %s=%s is not a non-negative integer%s", k, excerpt.Quote(v), rangeNote(err))
		}
		return n, true, nil
	}
	rank, hasRank, err := get("RANK")
	if err != nil {
		return Rendezvous{}, err
	}
	world, hasWorld, err := get("WORLD_SIZE")
	if err != nil {
		return Rendezvous{}, err
	}
	local, hasLocal, err := get("LOCAL_RANK")
	if err != nil {
		return Rendezvous{}, err
	}
	if !hasRank && !hasWorld {
		return Rendezvous{Rank: 0, WorldSize: 1, LocalRank: local}, nil
	}
	if !hasRank || !hasWorld {
		return Rendezvous{}, errors.New("jit: set both RANK and WORLD_SIZE (as torchrun or `kgen launch` do), or neither for one process")
	}
	if world < 1 || rank >= world {
		return Rendezvous{}, fmt.Errorf("jit: RANK=%d is not below WORLD_SIZE=%d", rank, world)
	}
	perNode, hasPerNode, err := get("LOCAL_WORLD_SIZE")
	if err != nil {
		return Rendezvous{}, err
	}
	switch {
	case hasPerNode && (perNode < 1 || perNode > world):
		return Rendezvous{}, fmt.Errorf("jit: LOCAL_WORLD_SIZE=%d: want 1 to WORLD_SIZE=%d ranks per node", perNode, world)
	case hasPerNode && hasLocal && local >= perNode:
		return Rendezvous{}, fmt.Errorf("jit: LOCAL_RANK=%d is not below LOCAL_WORLD_SIZE=%d", local, perNode)
	case !hasLocal && hasPerNode:
		local = rank % perNode
	case !hasLocal:
		local = rank
	}
	rv := Rendezvous{Rank: rank, WorldSize: world, LocalRank: local}
	if world == 1 {
		return rv, nil
	}
	addr := os.Getenv("MASTER_ADDR")
	port, hasPort, err := get("MASTER_PORT")
	if err != nil {
		return Rendezvous{}, err
	}
	if addr == "" || !hasPort {
		return Rendezvous{}, fmt.Errorf("jit: WORLD_SIZE=%d needs MASTER_ADDR and MASTER_PORT (where rank 0 serves the NVSHMEM unique ID)", world)
	}
	if p, ok, err := get("KGEN_BOOTSTRAP_PORT"); err != nil {
		return Rendezvous{}, err
	} else if ok {
		port = p
	} else if strings.EqualFold(os.Getenv("TORCHELASTIC_USE_AGENT_STORE"), "true") {
		port++
	}
	rv.Addr = net.JoinHostPort(addr, strconv.Itoa(port))
	return rv, nil
}

const bootstrapMagic = "KGENUID1"

// ExchangeUniqueID gives every rank rank 0's unique ID: rank 0 passes its ID and serves it
// at rv.Addr until all WorldSize-1 others have fetched it; the others pass nil and retry
// connecting until ctx ends. A rank that never shows up makes the others fail when ctx ends,
// with an error naming it. A Rendezvous that cannot work (a rank outside 0..WorldSize-1, a
// negative WorldSize, an Addr that is not host:port) is an error at once, not retried.
func ExchangeUniqueID(ctx context.Context, rv Rendezvous, uid []byte) ([]byte, error) {
	if rv.WorldSize < 0 {
		return nil, fmt.Errorf("jit: bootstrap: Rendezvous.WorldSize %d is negative", rv.WorldSize)
	}
	if rv.WorldSize <= 1 {
		return uid, nil
	}
	if rv.Rank < 0 || rv.Rank >= rv.WorldSize {
		return nil, fmt.Errorf("jit: bootstrap: Rendezvous.Rank %d is not in 0..%d (WorldSize %d)", rv.Rank, rv.WorldSize-1, rv.WorldSize)
	}
	if _, port, err := net.SplitHostPort(rv.Addr); err != nil || port == "" {
		return nil, fmt.Errorf("jit: bootstrap: Rendezvous.Addr %s is not host:port (where rank 0 serves the unique ID)", excerpt.Quote(rv.Addr))
	}
	if rv.Rank == 0 {
		if len(uid) == 0 || len(uid) > 1<<16 {
			return nil, fmt.Errorf("jit: bootstrap: rank 0 has a unique ID of %d bytes", len(uid))
		}
		return uid, serveUniqueID(ctx, rv, uid)
	}
	return fetchUniqueID(ctx, rv)
}

func listenAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return addr
	}
	return net.JoinHostPort("", port) // MASTER_ADDR names this host as others see it
}

// helloWait bounds how long rank 0 waits for a connection's hello: a connection silent for
// longer is not a kgen rank (a rank sends its hello as soon as it connects).
const helloWait = 5 * time.Second

// serveUniqueID serves uid to ranks 1..WorldSize-1. Each connection is served on its own,
// so one that stays silent holds up no other; a connection that is not a kgen rank (it
// closes, is silent past helloWait or sends something else) is dropped and counted, not
// fatal: a port scanner or health check must not fail the job. A rank that states another
// WORLD_SIZE is. Every connection is closed when ctx ends.
func serveUniqueID(ctx context.Context, rv Rendezvous, uid []byte) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listenAddr(rv.Addr))
	if err != nil {
		return fmt.Errorf("jit: bootstrap: rank 0 cannot listen on %s: %w (is MASTER_PORT free? set KGEN_BOOTSTRAP_PORT to use another)", excerpt.Cut(rv.Addr, maxErrName), err)
	}
	type served struct {
		rank         int
		err, strayed error
	}
	results := make(chan served)
	done := make(chan struct{})
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	closeAll := func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
	}
	stop := context.AfterFunc(ctx, closeAll)
	var wg sync.WaitGroup
	defer func() {
		stop()
		close(done)
		closeAll()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				rank, err, strayed := serveOne(ctx, c, rv, uid)
				c.Close()
				mu.Lock()
				delete(open, c)
				mu.Unlock()
				select {
				case results <- served{rank, err, strayed}:
				case <-done:
				}
			}()
		}
	}()
	seen := map[int]bool{}
	strays := 0
	var firstStray error
	for len(seen) < rv.WorldSize-1 {
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("jit: bootstrap: ranks %s did not connect to %s in time (did they start? did one fail?)", missingRanks(rv.WorldSize, seen), excerpt.Cut(rv.Addr, maxErrName))
			if strays > 0 {
				msg += fmt.Sprintf("; %d connection(s) that were not kgen ranks were dropped, the first: %v", strays, firstStray)
			}
			return errors.New(msg)
		case r := <-results:
			switch {
			case r.strayed != nil:
				if strays++; firstStray == nil {
					firstStray = r.strayed
				}
			case r.err != nil:
				return r.err
			default:
				seen[r.rank] = true
			}
		}
	}
	return nil
}

// serveOne reads a connection's hello and answers it. strayed, when not nil, says why the
// connection is not a kgen rank; err is a kgen rank's problem (another WORLD_SIZE, a failed
// reply).
func serveOne(ctx context.Context, c net.Conn, rv Rendezvous, uid []byte) (rank int, err, strayed error) {
	dl := time.Now().Add(helloWait)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.SetDeadline(dl)
	var hello [len(bootstrapMagic) + 8]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		return 0, nil, fmt.Errorf("reading a hello from %s: %w", c.RemoteAddr(), err)
	}
	if string(hello[:len(bootstrapMagic)]) != bootstrapMagic {
		return 0, nil, fmt.Errorf("%s sent %q, not a kgen rank's hello (port in use by something else?)", c.RemoteAddr(), hello[:])
	}
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	} else {
		c.SetDeadline(time.Time{})
	}
	rank = int(binary.LittleEndian.Uint32(hello[len(bootstrapMagic):]))
	world := int(binary.LittleEndian.Uint32(hello[len(bootstrapMagic)+4:]))
	var reply []byte
	var rerr error
	if world != rv.WorldSize || rank <= 0 || rank >= rv.WorldSize {
		rerr = fmt.Errorf("jit: bootstrap: rank %d of %d connected, but rank 0 has WORLD_SIZE=%d", rank, world, rv.WorldSize)
		reply = binary.LittleEndian.AppendUint32(nil, 0)
	} else {
		reply = binary.LittleEndian.AppendUint32(nil, uint32(len(uid)))
		reply = append(reply, uid...)
	}
	if _, err := c.Write(reply); err != nil && rerr == nil {
		rerr = fmt.Errorf("jit: bootstrap: sending the unique ID to rank %d: %w", rank, err)
	}
	return rank, rerr, nil
}

func missingRanks(n int, seen map[int]bool) string {
	const show = 16 // a world of a million ranks gives a short message, found in a short loop
	var out []string
	for r := 1; r < n && len(out) < show; r++ {
		if !seen[r] {
			out = append(out, strconv.Itoa(r))
		}
	}
	s := "[" + strings.Join(out, " ") + "]"
	if more := n - 1 - len(seen) - len(out); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

func fetchUniqueID(ctx context.Context, rv Rendezvous) ([]byte, error) {
	var d net.Dialer
	var last error
	for {
		c, err := d.DialContext(ctx, "tcp", rv.Addr)
		if err == nil {
			uid, err := fetchOne(ctx, c, rv)
			c.Close()
			if err == nil {
				return uid, nil
			}
			last = err
			if errors.Is(err, errWorldMismatch) {
				return nil, err
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("jit: bootstrap: rank %d: rank 0 did not serve the unique ID at %s in time (is it running? did it fail?): %v", rv.Rank, excerpt.Cut(rv.Addr, maxErrName), excerpt.Cut(fmt.Sprint(last), maxErrSignature))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var errWorldMismatch = errors.New("rank 0 refused this rank (WORLD_SIZE differs)")

func fetchOne(ctx context.Context, c net.Conn, rv Rendezvous) ([]byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	// A context that ends without a deadline ends the reads too (a server that accepts
	// and never replies held this rank for ever).
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	hello := append([]byte(bootstrapMagic), make([]byte, 8)...)
	binary.LittleEndian.PutUint32(hello[len(bootstrapMagic):], uint32(rv.Rank))
	binary.LittleEndian.PutUint32(hello[len(bootstrapMagic)+4:], uint32(rv.WorldSize))
	if _, err := c.Write(hello); err != nil {
		return nil, err
	}
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint32(n[:])
	if size == 0 {
		return nil, fmt.Errorf("jit: bootstrap: rank %d of %d: %w", rv.Rank, rv.WorldSize, errWorldMismatch)
	}
	if size > 1<<16 {
		return nil, fmt.Errorf("jit: bootstrap: unique ID of %d bytes is too large", size)
	}
	uid := make([]byte, size)
	if _, err := io.ReadFull(c, uid); err != nil {
		return nil, err
	}
	return uid, nil
}
