package kernels_test

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// The sm_90a attention for bf16, head dim 128, causal: its build and the launch of a
// problem of 2 batches of 1000 queries over 1000 keys, 16 query heads sharing 4 K/V heads.
func ExampleAttentionSM90Config_Launch() {
	cfg := kernels.DefaultAttentionSM90Config(dsl.BF16, 128, true)
	k := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
	kernels.AttentionSM90(k, cfg)
	if _, err := k.Build(); err != nil {
		fmt.Println(err)
		return
	}
	l, err := cfg.Launch(2, 16, 4, 1000, 1000)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Name())
	fmt.Printf("grid %d, block %d, shared %d bytes\n", l.Grid, l.Block, l.SharedBytes)
	fmt.Printf("Q map %v box %v; K and V maps %v box %v\n", l.Q.Dims, l.Q.Box, l.K.Dims, l.K.Box)
	// Output:
	// attention_sm90_bf16_d128_128x128_2s_causal_ov
	// grid 256, block 384, shared 164864 bytes
	// Q map [2048 1000 2] box [64 128 1]; K and V maps [512 1000 2] box [64 128 1]
}
