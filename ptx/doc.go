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
//
// The instruction tables (rules_*.go, one file per family) are data: ordered qualifier slots
// with their legal values, type suffixes, operand shapes, forbidden qualifier combinations,
// and the PTX version and target each form needs. Verify checks a module against them and
// names the rule a form breaks; RequiredVersion gives the lowest .version the module needs.
// The tests enumerate every form the tables describe and assemble each with ptxas for every
// target that allows it (see docs/ptx.md).
//
// Besides instructions, a function body holds labels (Instr.Label), block-scoped declarations
// (Instr.Decl) and scope brackets (Op ScopeOpen/ScopeClose), which CallSeq uses for the .param
// call ABI. Operands are Reg, Imm, Special, Sym, Addr, Vec, Sink, Pair (a|b) and Not (!p).
package ptx
