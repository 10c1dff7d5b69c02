package dsl_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe21BulkWaitGroups: BulkWait documents 0 to 63 groups, but ptx.Verify took
// cp.async.bulk.wait_group 0 and 1 only, so BulkWait(2, true) failed to build ("immediate 2
// is not one of 0, 1"); ptxas 13 assembles any N. Probe 21.
func TestProbe21BulkWaitGroups(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 63} {
		for _, read := range []bool{false, true} {
			k := dsl.New("bw", dsl.WithTarget(ptx.SM90))
			k.BulkWait(n, read)
			if _, err := k.Build(); err != nil {
				t.Errorf("BulkWait(%d, %v): %v", n, read, err)
			}
		}
	}
}
