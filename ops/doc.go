// Package ops runs the kernel library on typed device tensors, one call per operation.
//
// A Tensor[T] is a shape and strides (in elements) over a *jit.Buffer[T]: New makes a
// row-major tensor, ColMajor a column-major matrix, Strided any layout; Slice, Narrow,
// Transpose and View make views without touching memory, each checked to stay inside its
// buffer.
//
//	dev, _ := jit.Open(0)                    // a GPU if there is one, else the emulator
//	buf, _ := jit.Alloc[float32](dev, 64*128)
//	x, _ := ops.New(buf, 64, 128)            // 64 x 128, row-major
//	left, _ := x.Narrow(1, 0, 100)           // its first 100 columns: rows 128 apart
//	err := ops.Softmax(ctx, stream, left, left)
//
// Every op takes (ctx, stream, outputs, inputs[, options]); a nil stream is the device's
// default stream. The first call for a kernel builds and loads it on the tensors' device
// (once per device: concurrent callers wait for it); later calls with the same dtypes,
// shape and strides only look their plan up and launch, with no allocation on the device and
// no synchronization, so they can be captured in a CUDA graph (jit.Stream.BeginCapture)
// once a call outside the capture has made the plan. Launches do not wait: read results
// after the stream's work (Stream.Synchronize, or a synchronous copy).
//
// Each op picks its kernel for the device and the shape: Matmul runs gemm_sm90 (TMA +
// wgmma) on compute capability 9.0 (the emulator reports 9.0 and runs it too) and the
// mma.sync gemm elsewhere; Softmax and RowSum run the library's row kernels as
// kernels.ChooseRowKernel picks them for dense rows, and strided variants for views; Add,
// Axpy and Transpose run vector_add, axpy and transpose; SwiGLU runs swiglu (swiglu_masked on
// the masked layout); GroupedMatmul runs gemm_sm90_grouped; Attention runs the forward
// attention kernels.Attention in the configuration AttentionConfigFor picks. An operand a kernel cannot take (a
// dtype, a shape, strides, an alignment) is an error naming the operand and the rule; a call
// on a closed device reports jit.ErrClosed and drops that device's cache.
//
// Package ops/dist runs a collectives.Comm's collectives and fused matmuls on tensors of the
// Comm's symmetric memory, which these ops read and write too, and a whole MoE layer
// (dist.MoELayer: dispatch, GroupedMatmul, SwiGLU, GroupedMatmul, combine).
package ops
