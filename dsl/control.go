package dsl

import "github.com/kgen-dev/kgen/ptx"

// IfStmt is a runtime if; Else adds the other branch.
type IfStmt struct {
	k      *Kernel
	cond   Value  // the condition (its Else's branch diverges alike)
	end    string // the label closing the then-branch
	index  int    // the position of that label in the body
	done   bool   // no Else may be added (the If failed, or Else was called)
	failed bool   // the If itself was an error (already recorded)
}

func (k *Kernel) branchUnless(cond Value, target string) bool {
	if !k.own(cond, "If") {
		return false
	}
	if cond.t != Bool {
		k.errorf("condition is %s, not Bool (compare with Lt, Eq, ...)", cond.t)
		return false
	}
	if cond.IsConst() {
		if cond.op.(ptx.Imm).Bits&1 == 0 {
			k.emit(&ptx.Instr{Op: "bra", Q: []string{"uni"}, Args: []ptx.Operand{ptx.Sym(target)}})
		}
		return true
	}
	g := cond.op.(ptx.Reg)
	k.emit(&ptx.Instr{Guard: &g, GuardNeg: true, Op: "bra", Args: []ptx.Operand{ptx.Sym(target)}})
	return true
}

func (k *Kernel) place(label string) {
	if k.afterBuild("label placed") {
		return
	}
	k.fn.Body = append(k.fn.Body, &ptx.Instr{Label: label})
}

// If runs then at run time when cond (a Bool) is true.
func (k *Kernel) If(cond Value, then func()) *IfStmt {
	if !k.live() {
		return nil
	}
	if then == nil {
		k.errorf("If: the then function is nil")
		return &IfStmt{k: k, done: true, failed: true}
	}
	end := k.label()
	if !k.branchUnless(cond, end) {
		return &IfStmt{k: k, done: true, failed: true}
	}
	k.inCond(cond, then)
	k.place(end)
	return &IfStmt{k: k, cond: cond, end: end, index: len(k.fn.Body) - 1}
}

// Else runs els when the If's condition was false. Call it directly on If's result.
func (s *IfStmt) Else(els func()) {
	if s == nil || s.k == nil {
		return // not made by If: there is no kernel to record the misuse in
	}
	k := s.k
	switch {
	case s.failed:
		return
	case s.done:
		k.errorf("Else called twice on one If")
		return
	case els == nil:
		k.errorf("Else: the function is nil")
		return
	case k.afterBuild("Else"):
		return
	}
	s.done = true
	if s.index != len(k.fn.Body)-1 {
		k.errorf("Else must directly follow its If")
		return
	}
	join := k.label()
	k.fn.Body = k.fn.Body[:s.index]
	k.emit(&ptx.Instr{Op: "bra", Q: []string{"uni"}, Args: []ptx.Operand{ptx.Sym(join)}})
	k.place(s.end)
	k.inCond(s.cond, els)
	k.place(join)
}

// Var returns a new mutable variable of type t holding init (a Value of type t or a Go
// number made a constant as Const does: fp8 types take Go floats rounded to nearest even,
// and 0 is the all-zero bit pattern); change it with Set.
func (k *Kernel) Var(t Type, init any) Value {
	if !k.live() {
		return Value{}
	}
	v, ok := k.val(init, t, "Var")
	if !ok {
		return k.poison(t)
	}
	d := k.reg(t)
	k.mutable.add(d)
	k.mov(d, v)
	return Value{k: k, t: t, op: d}
}

// Set assigns x to the variable v, made by Var. Other values are immutable: the DSL reuses
// them for equal computations, so changing one would change those too.
func (k *Kernel) Set(v Value, x any) {
	if !k.live() {
		return
	}
	if !k.own(v, "Set") {
		return
	}
	r, ok := v.op.(ptx.Reg)
	if !ok {
		k.errorf("Set: %s is a constant, not a variable (make one with Var)", v)
		return
	}
	if !k.mutable.has(r) {
		k.errorf("Set: %s is not a variable (make one with Var); values are immutable and shared by equal computations", v)
		return
	}
	w, ok := k.val(x, v.t, "Set")
	if !ok {
		return
	}
	k.mov(r, w)
}

func (k *Kernel) mov(d ptx.Reg, v Value) {
	t := v.t.RegType()
	if t.IsFloat() && t != F32 && t != F64 {
		t = t.BitType() // no mov.f16
	}
	k.op("mov", nil, t, d, k.operand(v))
}

// For runs body(i) for i = from; i < to; i += step at run time. from, to and step are
// integer Values or Go integers of one type (the first Value's); step must be positive.
func (k *Kernel) For(from, to, step any, body func(i Value)) {
	if !k.live() {
		return
	}
	if body == nil {
		k.errorf("For: the body function is nil")
		return
	}
	t := ptx.NoType
	for _, x := range []any{from, to, step} {
		if v, ok := x.(Value); ok {
			t = v.t
			break
		}
	}
	if t == ptx.NoType {
		t = U32
	}
	if !isInt(t) {
		k.errorf("For: loop bounds are %s, not an integer type", t)
		return
	}
	// A constant step must be positive; a runtime step is the caller's promise.
	if s, ok := step.(Value); ok && s.IsConst() && (constInt(s) == 0 || constInt(s) < 0 && s.t.Kind() == ptx.KindSigned) || isNonPositive(step) {
		k.errorf("For: step must be positive")
		return
	}
	hi, ok1 := k.val(to, t, "For")
	st, ok2 := k.val(step, t, "For")
	if !ok1 || !ok2 {
		return
	}
	i := k.Var(t, from)
	head, end := k.label(), k.label()
	k.place(head)
	if !k.branchUnless(i.Lt(hi), end) {
		return
	}
	k.scoped(func() { body(i) })
	k.Set(i, i.Add(st))
	k.emit(&ptx.Instr{Op: "bra", Q: []string{"uni"}, Args: []ptx.Operand{ptx.Sym(head)}})
	k.place(end)
}

// isNonPositive reports whether a Go integer step is zero or negative.
func isNonPositive(x any) bool {
	switch x := x.(type) {
	case int:
		return x <= 0
	case int64:
		return x <= 0
	case int32:
		return x <= 0
	case uint:
		return x == 0
	case uint32:
		return x == 0
	case uint64:
		return x == 0
	}
	return false
}

// While runs body while cond() is true; cond is evaluated at run time before each iteration.
func (k *Kernel) While(cond func() Value, body func()) {
	if !k.live() {
		return
	}
	if cond == nil || body == nil {
		k.errorf("While: the condition or body function is nil")
		return
	}
	head, end := k.label(), k.label()
	k.place(head)
	k.scoped(func() {
		if !k.branchUnless(cond(), end) {
			return
		}
		body()
		k.emit(&ptx.Instr{Op: "bra", Q: []string{"uni"}, Args: []ptx.Operand{ptx.Sym(head)}})
	})
	k.place(end)
}

// Return ends the calling thread's execution of the kernel.
func (k *Kernel) Return() {
	if !k.live() {
		return
	}
	k.emit(&ptx.Instr{Op: "ret"})
}
