package dsl_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

// builderProgram interprets fuzz bytes as a sequence of builder calls on one kernel: values
// of many types, arithmetic between any two of them (types that do not match included),
// loads and stores through pointers at any index, shared and local arrays of any size,
// runtime control flow nested three deep (values escaping it included), barriers,
// atomics, shuffles and Build called again.
type builderProgram struct {
	k     *dsl.Kernel
	data  []byte
	vals  []dsl.Value
	ptrs  []dsl.Ptr
	nameN int
	ops   int
}

var fuzzTypes = []dsl.Type{dsl.U32, dsl.I32, dsl.U64, dsl.I64, dsl.F32, dsl.F64, dsl.F16, dsl.BF16, dsl.U16, dsl.I16, dsl.U8, dsl.I8, dsl.Bool}

// newBuilderProgram starts with two values and two pointers, so that most programs use
// something valid.
func newBuilderProgram(k *dsl.Kernel, data []byte) *builderProgram {
	p := &builderProgram{k: k, data: data}
	p.vals = []dsl.Value{k.Param("n", dsl.U32), k.Param("x", dsl.F32), k.ThreadIdx(dsl.X)}
	p.ptrs = []dsl.Ptr{k.PtrParam("pf", dsl.F32), k.PtrParam("pu", dsl.U32)}
	return p
}

func (p *builderProgram) byte() byte {
	if len(p.data) == 0 {
		return 0
	}
	b := p.data[0]
	p.data = p.data[1:]
	return b
}

func (p *builderProgram) typ() dsl.Type { return fuzzTypes[int(p.byte())%len(fuzzTypes)] }

func (p *builderProgram) val() dsl.Value {
	if len(p.vals) == 0 {
		return dsl.Value{} // the zero Value: an error to use
	}
	return p.vals[int(p.byte())%len(p.vals)]
}

// like returns a value of a's type when the pool has one (most of the time), else any.
func (p *builderProgram) like(a dsl.Value) dsl.Value {
	if p.byte()%4 != 0 {
		var same []dsl.Value
		for _, v := range p.vals {
			if v.Type() == a.Type() {
				same = append(same, v)
			}
		}
		if len(same) > 0 {
			return same[int(p.byte())%len(same)]
		}
	}
	return p.val()
}

func (p *builderProgram) ptr() dsl.Ptr {
	if len(p.ptrs) == 0 {
		return dsl.Ptr{}
	}
	return p.ptrs[int(p.byte())%len(p.ptrs)]
}

// num returns a Go integer, small or extreme.
func (p *builderProgram) num() any {
	switch b := p.byte(); b % 8 {
	case 0:
		return int(int8(p.byte()))
	case 1:
		return 1 << (p.byte() % 64)
	case 2:
		return -1 << (p.byte() % 64)
	case 3:
		return uint64(1) << 63
	case 4:
		return 0
	default:
		return int(b) % 40
	}
}

func (p *builderProgram) name() string {
	p.nameN++
	if p.byte()%32 == 0 {
		return "_"
	}
	return fmt.Sprintf("a%d", p.nameN)
}

func (p *builderProgram) run(depth int) {
	k := p.k
	for len(p.data) > 0 && p.ops < 96 {
		p.ops++
		op := p.byte()
		if op == 255 && depth > 0 {
			return // end of this block
		}
		switch op % 24 {
		case 0:
			p.vals = append(p.vals, k.Param(p.name(), p.typ()))
		case 1:
			p.ptrs = append(p.ptrs, k.PtrParam(p.name(), p.typ()))
		case 2:
			p.vals = append(p.vals, k.Const(p.typ(), p.num()))
		case 3, 4:
			a := p.val()
			var x any = p.like(a)
			if op%24 == 4 {
				x = p.num()
			}
			var r dsl.Value
			switch p.byte() % 16 {
			case 0:
				r = a.Add(x)
			case 1:
				r = a.Sub(x)
			case 2:
				r = a.Mul(x)
			case 3:
				r = a.Div(x)
			case 4:
				r = a.Rem(x)
			case 5:
				r = a.Min(x)
			case 6:
				r = a.Max(x)
			case 7:
				r = a.And(x)
			case 8:
				r = a.Or(x)
			case 9:
				r = a.Xor(x)
			case 10:
				r = a.Shl(x)
			case 11:
				r = a.Shr(x)
			case 12:
				r = a.Lt(x)
			case 13:
				r = a.Eq(x)
			case 14:
				r = a.Ge(x)
			default:
				r = a.Ne(x)
			}
			p.vals = append(p.vals, r)
		case 5:
			a := p.val()
			var r dsl.Value
			switch p.byte() % 7 {
			case 0:
				r = a.Neg()
			case 1:
				r = a.Abs()
			case 2:
				r = a.Not()
			case 3:
				r = a.Sqrt()
			case 4:
				r = a.Rcp()
			case 5:
				r = a.Exp()
			default:
				r = a.Bitcast(p.typ())
			}
			p.vals = append(p.vals, r)
		case 6:
			p.vals = append(p.vals, p.val().To(p.typ()))
		case 7:
			q := p.ptr()
			if p.byte()%2 == 0 {
				q = q.At(p.val())
			} else {
				q = q.At(p.num())
			}
			p.vals = append(p.vals, k.Load(q))
		case 8:
			q := p.ptr()
			if p.byte()%2 == 0 {
				q = q.At(p.val())
			}
			var v dsl.Value
			for _, c := range p.vals {
				if c.Type() == q.Elem() && p.byte()%2 == 0 {
					v = c
				}
			}
			if v.Kernel() == nil {
				v = p.val()
			}
			k.Store(q, v)
		case 9:
			if depth < 3 {
				s := k.If(p.val(), func() { p.run(depth + 1) })
				if b := p.byte(); b%3 == 0 {
					s.Else(func() { p.run(depth + 1) })
					if b%9 == 0 {
						s.Else(func() {})
					}
				}
			}
		case 10:
			if depth < 3 {
				var from any = 0
				if p.byte()%2 == 0 {
					from = p.val()
				}
				k.For(from, p.byte()%5, 1+int(p.byte()%3), func(i dsl.Value) {
					p.vals = append(p.vals, i)
					p.run(depth + 1)
				})
			}
		case 11:
			if depth < 3 {
				n := k.Var(dsl.U32, 0)
				lim := p.byte() % 4
				k.While(func() dsl.Value { return n.Lt(lim) }, func() {
					k.Set(n, n.Add(1))
					p.run(depth + 1)
				})
				p.vals = append(p.vals, n)
			}
		case 12:
			v := k.Var(p.typ(), p.num())
			p.vals = append(p.vals, v)
			k.Set(v, p.val())
		case 13:
			n := int(p.byte())
			switch p.byte() % 4 {
			case 0:
				n = 1 << (p.byte() % 64)
			case 1:
				n = -n
			}
			p.ptrs = append(p.ptrs, k.SharedArray(p.typ(), n))
		case 14:
			p.ptrs = append(p.ptrs, k.LocalArray(p.typ(), int(p.byte())*int(p.byte())*64))
		case 15:
			switch p.byte() % 3 {
			case 0:
				k.SyncThreads()
			case 1:
				k.NamedBarrier(int(p.byte()%20), 32*int(p.byte()%70))
			default:
				k.SyncWarp()
			}
		case 16:
			ops := []dsl.AtomOp{dsl.AtomAdd, dsl.AtomMin, dsl.AtomMax, dsl.AtomAnd, dsl.AtomExch, dsl.AtomInc}
			op := ops[int(p.byte())%len(ops)]
			if p.byte()%2 == 0 {
				p.vals = append(p.vals, k.Atomic(op, p.ptr(), p.val()))
			} else {
				k.Reduce(op, p.ptr(), p.val())
			}
		case 17:
			if p.byte()%2 == 0 {
				p.vals = append(p.vals, k.WarpReduce(p.val(), dsl.ReduceOp(p.byte()%7)))
			} else {
				p.vals = append(p.vals, k.ShuffleXor(p.val(), p.num()))
			}
		case 18:
			a := p.val()
			p.vals = append(p.vals, k.Select(p.val(), a, p.like(a)))
		case 19:
			switch p.byte() % 3 {
			case 0:
				p.vals = append(p.vals, k.ThreadIdx(dsl.X))
			case 1:
				p.vals = append(p.vals, k.BlockIdx(dsl.Y))
			default:
				p.vals = append(p.vals, k.GlobalThreadIdx(dsl.X))
			}
		case 20:
			p.ptrs = append(p.ptrs, p.ptr().At(p.num()))
		case 21:
			if depth > 0 {
				k.Return()
			}
		case 22:
			a := p.val()
			p.vals = append(p.vals, k.FMA(a, p.like(a), p.like(a)))
		case 23:
			if p.byte()%16 == 0 {
				k.Build() // early: everything after is an error, and changes nothing built
			}
		}
	}
}

// FuzzBuilder drives the builder with random call sequences: Build returns errors, never
// panics, and what it accepts ptxas assembles.
func FuzzBuilder(f *testing.F) {
	f.Add([]byte{1, 4, 0, 0, 7, 0, 0, 2, 4, 0, 0, 0, 8, 0, 1, 1})
	f.Add([]byte{0, 0, 9, 0, 3, 0, 0, 12, 1, 0, 4, 255, 3, 1, 1, 12})
	f.Add([]byte{1, 4, 10, 0, 5, 0, 7, 0, 1, 255, 8, 0, 0, 5})
	f.Add([]byte{13, 4, 40, 0, 14, 3, 3, 15, 1, 1, 9, 16, 0, 0, 0, 23, 0})
	f.Add([]byte{0, 0, 0, 0, 4, 0, 3, 4, 0, 4, 4, 0, 3, 0, 1, 1, 11, 1, 8, 0, 0, 0})
	var ptxas string
	f.Fuzz(func(t *testing.T, data []byte) {
		if ptxas == "" {
			ptxas = tooltest.Ptxas(t)
		}
		k := dsl.New("fuzz", dsl.WithTarget(ptx.SM90))
		p := newBuilderProgram(k, data)
		p.run(0)
		m, err := k.Build()
		if err != nil {
			return
		}
		d := t.TempDir()
		file := filepath.Join(d, "k.ptx")
		if err := os.WriteFile(file, []byte(m.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(ptxas, "-arch=sm_90", file, "-o", filepath.Join(d, "k.cubin")).CombinedOutput(); err != nil {
			t.Fatalf("Build accepted a kernel ptxas rejects: %v\n%s\n%s", err, out, m)
		}
	})
}
