// Package cudrv loads the CUDA driver at run time for the cuda-tagged GPU backend of jit.
// Without the cuda build tag it is empty.
package cudrv
