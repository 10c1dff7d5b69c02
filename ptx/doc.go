// Package ptx holds PTX as data: modules, functions, parameters, typed virtual registers and
// instructions, the rules that say which instruction forms each target and PTX ISA version
// allows (Verify), and the printer that writes the text ptxas reads (Print).
//
// An instruction is an opcode, its qualifiers in PTX order, its type suffixes and its operands:
//
//	ld.relaxed.gpu.global.v4.f32 {%f1,%f2,%f3,%f4}, [%rd1+16];
//
// is Instr{Op: "ld", Q: []string{"relaxed", "gpu", "global", "v4"}, Types: []Type{F32}, ...}.
// Printing is the last pass; passes are plain functions over *Module.
package ptx
