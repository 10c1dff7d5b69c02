package ptx

// Control flow: bra, call, ret, exit, trap, nanosleep.

func init() {
	rules["bra"] = &rule{slots: []slot{one("uni")}, args: fixed(arg{kind: argLabel})}
	rules["ret"] = &rule{slots: []slot{one("uni")}, args: fixed()}
	rules["exit"] = &rule{args: fixed()}
	rules["trap"] = &rule{args: fixed()}
	rules["nanosleep"] = &rule{types: [][]Type{{U32}}, args: fixed(src(U32)),
		need: func(*Instr) []need { return []need{nd(63, 70, "nanosleep needs sm_70 and PTX 6.3")} }}
	// call{.uni} (rets), fn, (args): Args are [Vec rets] Sym fn [Vec args]; verifyCall checks
	// them against the callee's declaration. Arguments are registers, immediates or .param
	// variables declared in an enclosing block (see CallSeq).
	rules["call"] = &rule{
		slots:     []slot{one("uni")},
		extraOnly: true,
		check: func(in *Instr) string {
			if in.Args == nil {
				return ""
			}
			fn := -1
			for i, a := range in.Args {
				if _, ok := a.(Sym); ok {
					fn = i
					break
				}
			}
			if fn < 0 || fn > 1 || len(in.Args) > fn+2 {
				return "call takes [(rets),] fn[, (args)]"
			}
			for i, a := range in.Args {
				if i == fn {
					continue
				}
				v, ok := a.(Vec)
				if !ok {
					return "call's return and argument lists are vectors"
				}
				for _, e := range v {
					switch e.(type) {
					case Reg, Sym:
					case Imm:
						if i < fn {
							return "call's return list holds registers or .param variables"
						}
					default:
						return "call's lists hold registers, immediates or .param variables"
					}
				}
			}
			return ""
		},
		extra: func() []*Instr {
			return []*Instr{
				{Op: "call", Q: []string{"uni"}, Args: []Operand{Vec{Reg{B32, 0}}, Sym(formCallee), Vec{Reg{B64, 0}}}},
				{Op: "call", Args: []Operand{Vec{Reg{B32, 0}}, Sym(formCallee), Vec{IntImm(B64, 0)}}},
			}
		},
	}
}

// CallSeq returns the call sequence llc and nvcc emit for a call of fn: a block that
// declares one .param variable per argument and return value, stores the arguments into
// them, calls fn with call.uni, and loads the results into rets:
//
//	{
//		.param .b64 param0;
//		st.param.b64 [param0], %rd1;
//		.param .b32 retval0;
//		call.uni (retval0), fn, (param0);
//		ld.param.b32 %r2, [retval0];
//	}
//
// args are registers or immediates (one per fn.Params); rets are registers (one per
// fn.Rets). Byte-array parameters (Array > 0) are not supported by CallSeq. A nil fn has no
// call sequence (nil).
func CallSeq(fn *Func, rets []Reg, args []Operand) []*Instr {
	if fn == nil {
		return nil
	}
	out := []*Instr{{Op: ScopeOpen}}
	var argSyms, retSyms Vec
	for i, p := range fn.Params {
		name := "param" + itoa(i)
		out = append(out, &Instr{Decl: &Var{Space: SpaceParam, Name: name, Type: p.Type, Align: p.Align}})
		if i < len(args) {
			out = append(out, &Instr{Op: "st", Q: []string{"param"}, Types: []Type{p.Type}, Args: []Operand{Addr{Base: Sym(name)}, args[i]}})
		}
		argSyms = append(argSyms, Sym(name))
	}
	for i, p := range fn.Rets {
		name := "retval" + itoa(i)
		out = append(out, &Instr{Decl: &Var{Space: SpaceParam, Name: name, Type: p.Type, Align: p.Align}})
		retSyms = append(retSyms, Sym(name))
	}
	call := &Instr{Op: "call", Q: []string{"uni"}}
	if len(retSyms) > 0 {
		call.Args = append(call.Args, retSyms)
	}
	call.Args = append(call.Args, Sym(fn.Name))
	if len(argSyms) > 0 {
		call.Args = append(call.Args, argSyms)
	}
	out = append(out, call)
	for i, p := range fn.Rets {
		if i < len(rets) {
			out = append(out, &Instr{Op: "ld", Q: []string{"param"}, Types: []Type{p.Type}, Args: []Operand{rets[i], Addr{Base: retSyms[i]}}})
		}
	}
	return append(out, &Instr{Op: ScopeClose})
}
