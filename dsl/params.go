package dsl

import (
	"reflect"
	"sync"

	"github.com/kgen-dev/kgen/internal/naming"
	"github.com/kgen-dev/kgen/ptx"
)

// PeerTable is a kernel parameter holding a device array of u64 addresses, one per GPU, each
// pointing to global memory of element type Elem (a symmetric buffer's copies on every GPU).
type PeerTable struct {
	tbl  Ptr // the table itself, U64 elements
	elem Type
}

// Elem returns the element type the table's addresses point to.
func (t PeerTable) Elem() Type { return t.elem }

// Table returns the table as a pointer to its U64 entries.
func (t PeerTable) Table() Ptr { return t.tbl }

// Peer loads entry g (a Go integer or an integer Value) and returns it as a pointer to Elem
// values in global memory. Each call emits the load.
func (t PeerTable) Peer(g any) Ptr {
	k := t.tbl.k
	if k == nil {
		return Ptr{}
	}
	return k.PtrFrom(k.Load(t.tbl.At(g)), t.elem, ptx.SpaceGlobal)
}

// Params declares one kernel parameter per field of the struct A, in field order, and
// returns an A whose fields hold the parameters' handles. Field types:
//
//   - Ptr: a pointer to global memory holding dt values (as PtrParam);
//   - Value: a scalar of type dt (as Param);
//   - PeerTable: a u64 array of one address per GPU, each pointing to dt values;
//   - TensorMap: a TMA tensor map by value over a tensor of dt values (as TensorMapParam).
//
// The PTX parameter of field InMC is named in_mc (the field name in snake_case, an acronym
// followed by "s" kept whole: NGPUs gives ngpus). The field's `kgen` tag, comma-separated,
// overrides: `kgen:"name=in_mc"` names the parameter, `kgen:"type=u32"` (or just `kgen:"u32"`)
// sets the scalar or element type in place of dt. Misuse (A not a struct, an unexported field
// or one of another type, a bad tag, two fields of one name) is recorded at the caller's
// line; the fields concerned are then placeholders.
func Params[A any](k *Kernel, dt Type) A {
	var a A
	if !k.live() {
		return a
	}
	v := reflect.ValueOf(&a).Elem()
	plan, err := paramPlanOf(v.Type())
	if err != "" {
		k.errorf("Params[%s]: %s", v.Type(), err)
		return a
	}
	defer k.hold()()
	for _, f := range plan {
		t := dt
		if f.typ != ptx.NoType {
			t = f.typ
		}
		if f.err != "" {
			k.errorf("Params[%s]: field %s: %s", v.Type(), f.field, f.err)
			if f.handle { // a placeholder, so that the kernel body can go on
				v.Field(f.index).Set(reflect.ValueOf(k.placeholder(f.kind, t)))
			}
			continue
		}
		switch f.kind {
		case fieldPtr:
			v.Field(f.index).Set(reflect.ValueOf(k.PtrParam(f.name, t)))
		case fieldValue:
			v.Field(f.index).Set(reflect.ValueOf(k.Param(f.name, t)))
		case fieldPeers:
			if !hasMem(t) {
				k.errorf("peer table parameter %s: no memory type %s", f.name, typeName(t))
				t = U8
			}
			v.Field(f.index).Set(reflect.ValueOf(PeerTable{tbl: k.PtrParam(f.name, U64), elem: t}))
		case fieldTensorMap:
			v.Field(f.index).Set(reflect.ValueOf(k.TensorMapParam(f.name, t)))
		}
	}
	return a
}

type fieldKind int

const (
	fieldPtr fieldKind = iota
	fieldValue
	fieldPeers
	fieldTensorMap
)

// paramField is what Params does with one field of A.
type paramField struct {
	index  int
	field  string // the Go field name
	name   string // the PTX parameter name
	kind   fieldKind
	handle bool   // the field's type is a parameter handle type
	typ    Type   // the tag's type, NoType for dt
	err    string // why the field cannot be a parameter
}

var (
	ptrType   = reflect.TypeFor[Ptr]()
	valueType = reflect.TypeFor[Value]()
	peersType = reflect.TypeFor[PeerTable]()
	tmapType  = reflect.TypeFor[TensorMap]()
	planCache sync.Map // reflect.Type -> []paramField
)

// paramPlanOf reads the struct type t once; err says why t cannot be a parameter struct.
func paramPlanOf(t reflect.Type) ([]paramField, string) {
	if t.Kind() != reflect.Struct {
		return nil, "not a struct (want a struct of dsl.Ptr, dsl.Value, dsl.PeerTable and dsl.TensorMap fields)"
	}
	if p, ok := planCache.Load(t); ok {
		return p.([]paramField), ""
	}
	plan := make([]paramField, t.NumField())
	byName := map[string]string{}
	for i := range plan {
		sf := t.Field(i)
		f := paramField{index: i, field: sf.Name, name: naming.Snake(sf.Name)}
		switch {
		case !sf.IsExported():
			f.err = "unexported (parameters are exported fields)"
		case sf.Anonymous:
			f.err = "embedded (name each parameter field)"
		case sf.Type == ptrType:
			f.kind = fieldPtr
		case sf.Type == valueType:
			f.kind = fieldValue
		case sf.Type == peersType:
			f.kind = fieldPeers
		case sf.Type == tmapType:
			f.kind = fieldTensorMap
		default:
			f.err = "type " + sf.Type.String() + " is not a parameter type (dsl.Ptr, dsl.Value, dsl.PeerTable or dsl.TensorMap)"
		}
		f.handle = f.err == ""
		if f.err == "" {
			f.err = parseParamTag(sf.Tag, &f)
		}
		if f.err == "" {
			if !ptx.ValidIdent(f.name) {
				f.err = "parameter name " + f.name + " is not a valid PTX identifier"
			} else if other, dup := byName[f.name]; dup {
				f.err = "parameter name " + f.name + " is also field " + other + "'s"
			} else {
				byName[f.name] = f.field
			}
		}
		plan[i] = f
	}
	planCache.Store(t, plan)
	return plan, ""
}

// parseParamTag applies a `kgen:"name=x,type=t"` tag to f; it returns what is wrong with it.
func parseParamTag(tag reflect.StructTag, f *paramField) string {
	for _, it := range naming.Items(tag) {
		switch it.Key {
		case "name":
			if it.Value == "" {
				return "tag " + it.Text + ": empty name"
			}
			f.name = it.Value
		case "type":
			t, ok := ptx.ParseType(it.Value)
			if !ok || t == Bool || t == ptx.B128 {
				return "tag " + it.Text + ": unknown type " + it.Value + " (want a DSL type such as u32 or f16)"
			}
			f.typ = t
		default:
			return "tag " + it.Text + ": unknown key " + it.Key + " (want name= or type=)"
		}
	}
	return ""
}

// placeholder returns a handle of the field kind that stands in for a parameter not declared.
func (k *Kernel) placeholder(kind fieldKind, t Type) any {
	if !hasMem(t) {
		t = U8 // a placeholder whose element size divides
	}
	p := Ptr{k: k, addr: k.poison(U64), elem: t, space: ptx.SpaceGlobal}
	switch kind {
	case fieldValue:
		return k.poison(t)
	case fieldPeers:
		p.elem = U64
		return PeerTable{tbl: p, elem: t}
	case fieldTensorMap:
		return k.tensorMapPlaceholder(t)
	}
	return p
}
