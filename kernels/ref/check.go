package ref

import (
	"fmt"
	"math"
)

// The harnesses' checks of the numbers a problem passes besides its shape: a count that
// is negative where 0 means a default, and a scalar the kernel and the reference would not
// compute with alike, are refused naming the field (a negative Launches ran no launch and
// passed having checked nothing; a NaN Alpha failed with "NaN, want NaN").

// count refuses a negative count named field of kernel (0 means its default: def).
func count(kernel, field string, v int, def string) error {
	if v < 0 {
		return fmt.Errorf("%s: %s %d is negative (0 means %s)", kernel, field, v, def)
	}
	return nil
}

// scalar refuses a scalar the kernels take as an f32 that is not finite there (NaN, an
// infinity, or beyond float32's range, which the kernel would see as an infinity and the
// float64 reference not), and, with nonNeg, a negative one.
func scalar(kernel, field string, v float64, nonNeg bool) error {
	if math.IsNaN(v) || math.Abs(v) > math.MaxFloat32 {
		return fmt.Errorf("%s: %s %v: want a finite value within float32's range (the kernel takes an f32; no reference checks a NaN or infinite result)", kernel, field, v)
	}
	if nonNeg && v < 0 {
		return fmt.Errorf("%s: %s %v: want a positive scale, or 0 for 1/sqrt(head dim) (a negative one turns the masked keys' -Inf into +Inf: NaN)", kernel, field, v)
	}
	return nil
}

// scalars checks a GEMM problem's Alpha and Beta.
func scalars(kernel string, alpha, beta float64) error {
	if err := scalar(kernel, "Alpha", alpha, false); err != nil {
		return err
	}
	return scalar(kernel, "Beta", beta, false)
}
