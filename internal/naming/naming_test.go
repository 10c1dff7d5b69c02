package naming

import (
	"reflect"
	"testing"
)

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"In": "in", "InMC": "in_mc", "ScratchUC": "scratch_uc", "NGPUs": "ngpus", "Cols": "cols",
		"RowPtr2": "row_ptr2", "HTTPServer": "http_server", "A": "a", "IDs": "ids", "FlagsMC": "flags_mc",
	} {
		if got := Snake(in); got != want {
			t.Errorf("Snake(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParam(t *testing.T) {
	type s struct {
		InMC  int
		Other int `kgen:"u32, name=x"`
		Bare  int `kgen:"f16"`
	}
	ty := reflect.TypeFor[s]()
	if got := Param(ty.Field(0)); got != "in_mc" {
		t.Errorf("field InMC: %q", got)
	}
	if got := Param(ty.Field(1)); got != "x" {
		t.Errorf("field Other: %q", got)
	}
	if it := Items(ty.Field(2).Tag); len(it) != 1 || it[0].Key != "type" || it[0].Value != "f16" {
		t.Errorf("field Bare's items: %+v", it)
	}
}
