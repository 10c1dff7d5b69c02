package collectives

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
)

// TestProbe18PeerGoneError: a collective whose allocation fails because a peer rank
// returned early or panicked says "collectives:" once (it read "collectives: AllReduce of
// 1024 f32 by sum in place (do the ranks' calls differ?): collectives: jit: ..."), and the
// error still unwraps to the cause; probe 18.
func TestProbe18PeerGoneError(t *testing.T) {
	for _, mode := range []string{"return", "panic"} {
		t.Run(mode, func(t *testing.T) {
			var got error
			err := runRanksErr(2, false, false, 1, Options{}, func(e *rankEnv) error {
				b, err := e.c.Alloc(dsl.F32, 1024)
				if err != nil {
					return err
				}
				if e.r.Rank == 1 {
					if mode == "panic" {
						panic("rank 1 panics")
					}
					return errors.New("rank 1 gives up")
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				got = e.c.AllReduce(ctx, b, Sum)
				return nil
			})
			if err == nil {
				t.Fatal("RunRanks: nil; want rank 1's failure")
			}
			const want = "collectives: AllReduce of 1024 f32 by sum in place (do the ranks' calls differ?): jit: "
			if got == nil || !strings.HasPrefix(got.Error(), want) || strings.Count(got.Error(), "collectives: ") != 1 {
				t.Errorf("AllReduce with rank 1 gone: %v; want an error starting %q, \"collectives: \" once", got, want)
			}
			if errors.Unwrap(got) == nil {
				t.Errorf("AllReduce with rank 1 gone: %T does not unwrap to its cause", got)
			}
		})
	}
}
