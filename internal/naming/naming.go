// Package naming derives kernel parameter names from Go struct fields, the same way in the
// builder (dsl.Params) and on the host (jit's struct launches).
package naming

import (
	"reflect"
	"strings"
	"unicode"
)

// Snake is the snake_case of a Go field name: "InMC" -> "in_mc", "Cols" -> "cols",
// "NGPUs" -> "ngpus" (an acronym followed by "s" stays one word), "RowPtr2" -> "row_ptr2".
func Snake(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			plural := nextLower && r[i+1] == 's' && (i+2 == len(r) || !unicode.IsLower(r[i+2]))
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower && !plural) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// TagKey is the struct tag key of kernel parameter fields.
const TagKey = "kgen"

// Item is one comma-separated item of a `kgen:"..."` tag: key=value, or a bare value whose
// key is "type".
type Item struct{ Key, Value, Text string }

// Items splits a field's kgen tag.
func Items(tag reflect.StructTag) []Item {
	s := tag.Get(TagKey)
	if s == "" {
		return nil
	}
	var out []Item
	for _, text := range strings.Split(s, ",") {
		text = strings.TrimSpace(text)
		k, v, ok := strings.Cut(text, "=")
		if !ok {
			k, v = "type", k
		}
		out = append(out, Item{Key: k, Value: v, Text: text})
	}
	return out
}

// Param is the parameter name of a field: the tag's name=, else Snake of the field name.
func Param(f reflect.StructField) string {
	for _, it := range Items(f.Tag) {
		if it.Key == "name" && it.Value != "" {
			return it.Value
		}
	}
	return Snake(f.Name)
}
