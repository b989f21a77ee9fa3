package docs

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated sections of docs/api.md")

// conditionsTables renders the condition types and reasons declared in
// api/v1alpha1/conditions.go: one table per const block, in the file's
// order, each row a constant's value and its doc comment (the constant's
// name left out of the comment's first words).
func conditionsTables(t *testing.T) string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "api", "v1alpha1", "conditions.go"), nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST || g.Doc == nil {
			continue
		}
		text := strings.Join(strings.Fields(g.Doc.Text()), " ")
		// The block's first sentence (or what precedes its colon) is the
		// heading, the rest its paragraph.
		cut := strings.IndexAny(text, ".:")
		b.WriteString("#### " + text[:cut] + "\n\n")
		if rest := strings.TrimSpace(text[cut+1:]); rest != "" {
			b.WriteString(strings.ToUpper(rest[:1]) + rest[1:] + "\n\n")
		}
		b.WriteString("| Value | When |\n| --- | --- |\n")
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			value := constValue(t, v)
			doc := strings.Join(strings.Fields(v.Doc.Text()), " ")
			// "ReasonX: when..." or "ConditionX is ..." reads as the row's
			// text once the name is dropped.
			doc = strings.TrimPrefix(doc, v.Names[0].Name)
			for _, p := range []string{":", ",", " ", "is "} {
				doc = strings.TrimPrefix(doc, p)
			}
			doc = strings.ToUpper(doc[:1]) + doc[1:]
			doc = strings.ReplaceAll(doc, "|", `\|`)
			b.WriteString("| `" + value + "` | " + doc + " |\n")
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// constValue is a constant's string: a literal, or string(PhaseX) of a
// phase, whose value is its name without the prefix.
func constValue(t *testing.T, v *ast.ValueSpec) string {
	t.Helper()
	switch e := v.Values[0].(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(e.Value)
		if err != nil {
			t.Fatal(err)
		}
		return s
	case *ast.CallExpr:
		if id, ok := e.Args[0].(*ast.Ident); ok && strings.HasPrefix(id.Name, "Phase") {
			return strings.TrimPrefix(id.Name, "Phase")
		}
	}
	t.Fatalf("%s: a value this test cannot read", v.Names[0].Name)
	return ""
}

const (
	conditionsBegin = "<!-- conditions: generated from api/v1alpha1/conditions.go by `go test ./docs -run TestConditionsTable -update` (make docs) -->\n"
	conditionsEnd   = "<!-- end of conditions -->"
)

// TestConditionsTable: docs/api.md's table of condition types and reasons
// is the one api/v1alpha1/conditions.go declares, with its comments.
func TestConditionsTable(t *testing.T) {
	path := "api.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, conditionsBegin), strings.Index(doc, conditionsEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/api.md has no section between %q and %q", conditionsBegin, conditionsEnd)
	}
	want := conditionsTables(t) + "\n"
	got := doc[i+len(conditionsBegin) : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i+len(conditionsBegin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/api.md's conditions section differs from api/v1alpha1/conditions.go: run make docs")
}
