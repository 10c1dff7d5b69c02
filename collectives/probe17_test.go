package collectives

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestProbe17WriteF32Int32: WriteF32 into an I32 buffer rounds to nearest even as it says
// (1.5 was written as 1 and -2.5 as -2: truncated) and refuses NaN, ±Inf and values out of
// int32's range naming the element (3e9 and NaN were written as -2147483648); probe 17.
func TestProbe17WriteF32Int32(t *testing.T) {
	runRanks(t, 1, false, false, 1, Options{}, func(e *rankEnv) error {
		b, err := e.c.Alloc(dsl.I32, 6)
		if err != nil {
			return err
		}
		defer b.Free()
		if err := b.WriteF32([]float32{1.5, -2.5, 2.5, 7, -2147483648, 2147483520}); err != nil {
			return fmt.Errorf("WriteF32 of values in range: %v", err)
		}
		got, err := b.ReadF32()
		if err != nil {
			return err
		}
		if want := []float32{2, -2, 2, 7, -2147483648, 2147483520}; fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("WriteF32 then ReadF32 = %v; want %v (nearest even)", got, want)
		}
		for _, c := range []struct {
			v    []float32
			want string
		}{
			{[]float32{1, 3e9}, "element 1 (3e+09) is outside int32's range"},
			{[]float32{-2147483904}, "element 0 (-2.147484e+09) is outside int32's range"},
			{[]float32{float32(math.NaN())}, "element 0 (NaN) is outside int32's range"},
			{[]float32{0, 0, float32(math.Inf(1))}, "element 2 (+Inf) is outside int32's range"},
		} {
			if err := b.WriteF32(c.v); err == nil || !strings.Contains(err.Error(), c.want) {
				return fmt.Errorf("WriteF32(%v) into I32: %v; want an error holding %q", c.v, err, c.want)
			}
		}
		return nil
	})
}
