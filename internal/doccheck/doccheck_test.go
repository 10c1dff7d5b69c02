package doccheck

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

var marker = regexp.MustCompile(`^<!-- compiled: (\S+_test\.go)(?: (\w+))? -->$`)

// snippet is one marked fence of a doc.
type snippet struct {
	doc        string
	line       int
	file, fn   string
	code       []string
	normalized []string
}

// normalize drops blank lines and collapses each line's white space (gofmt aligns comments).
func normalize(lines []string) []string {
	var out []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// snippets returns doc's marked fences; a marker not followed by a ```go fence is an error.
func snippets(doc string) ([]snippet, error) {
	f, err := os.Open(doc)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []snippet
	var cur *snippet
	sc := bufio.NewScanner(f)
	n, pending := 0, (*snippet)(nil)
	for sc.Scan() {
		n++
		l := sc.Text()
		switch {
		case cur != nil && strings.TrimSpace(l) == "```":
			cur.normalized = normalize(cur.code)
			out, cur = append(out, *cur), nil
		case cur != nil:
			cur.code = append(cur.code, l)
		case pending != nil:
			if strings.TrimSpace(l) != "```go" {
				return nil, fmt.Errorf("%s:%d: the compiled marker is not followed by a ```go fence", doc, pending.line)
			}
			cur, pending = pending, nil
		default:
			if m := marker.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
				pending = &snippet{doc: doc, line: n, file: m[1], fn: m[2]}
			}
		}
	}
	if cur != nil || pending != nil {
		return nil, fmt.Errorf("%s: a marked fence is not closed", doc)
	}
	return out, sc.Err()
}

// source returns the lines of fn in file (the whole file when fn is empty).
func source(file, fn string) ([]string, error) {
	src, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return nil, err
	}
	if fn == "" {
		return strings.Split(string(src), "\n"), nil
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn && fd.Body != nil {
			return strings.Split(string(src[fset.Position(fd.Body.Pos()).Offset:fset.Position(fd.Body.End()).Offset]), "\n"), nil
		}
	}
	return nil, fmt.Errorf("%s has no function %s", file, fn)
}

// contains reports whether want is a contiguous run of have.
func contains(have, want []string) bool {
	for i := 0; i+len(want) <= len(have); i++ {
		ok := true
		for j := range want {
			if have[i+j] != want[j] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestDocSnippets: every marked fence of docs/*.md appears in the _test.go function it names
// (those compile with their packages' tests), and the docs whose snippets must be compiled
// have them marked.
func TestDocSnippets(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("docs: %v (%d files)", err, len(docs))
	}
	count := map[string]int{}
	for _, doc := range docs {
		sn, err := snippets(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sn {
			count[filepath.Base(doc)]++
			have, err := source(s.file, s.fn)
			if err != nil {
				t.Errorf("%s:%d: %v", filepath.Base(doc), s.line, err)
				continue
			}
			if len(s.normalized) == 0 || !contains(normalize(have), s.normalized) {
				t.Errorf("%s:%d: the snippet is not in %s %s (copy it there verbatim, or fix the doc):\n%s",
					filepath.Base(doc), s.line, s.file, s.fn, strings.Join(s.code, "\n"))
			}
		}
	}
	for doc, want := range map[string]int{"dsl.md": 3, "ops.md": 2} {
		if count[doc] < want {
			t.Errorf("docs/%s: %d compiled snippets marked, want at least %d", doc, count[doc], want)
		}
	}
}

// TestContains: a snippet matches only as a contiguous run of normalized lines.
func TestContains(t *testing.T) {
	have := normalize([]string{"a := 1", "", "\tb  :=  2 // two", "c()"})
	if !contains(have, normalize([]string{"b := 2   // two", "c()"})) {
		t.Error("a contiguous run with other white space did not match")
	}
	if contains(have, normalize([]string{"a := 1", "c()"})) {
		t.Error("a run with a gap matched")
	}
}
