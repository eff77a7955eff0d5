package broker

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// TestReasonTable: every Reason constant of errors.go is in the reasons
// table, so every front end's map, which its tests hold to Reasons(),
// covers it; and the table holds nothing else.
func TestReasonTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[Reason]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
				continue
			}
			for _, v := range vs.Values {
				lit := v.(*ast.BasicLit)
				declared[Reason(lit.Value[1:len(lit.Value)-1])] = true
			}
		}
	}
	if len(declared) < 30 {
		t.Fatalf("found only %d Reason constants in errors.go: %v", len(declared), declared)
	}
	for r := range declared {
		if _, ok := reasons[r]; !ok {
			t.Errorf("%s is not in the reasons table", r)
		}
	}
	for _, r := range Reasons() {
		if !declared[r] {
			t.Errorf("the reasons table holds %s, which errors.go does not declare", r)
		}
	}
	for _, r := range []Reason{ReasonNotLeader, ReasonThrottled, ReasonStorageFull, ReasonNotEnoughReplicasAfterAppend} {
		if !r.Retriable() || !(&Error{Reason: r}).Retriable() {
			t.Errorf("%s is not retriable", r)
		}
	}
	for _, r := range []Reason{ReasonUnknownProducerID, ReasonPermissionDenied, ReasonCorruptData, Reason("NO_SUCH_REASON")} {
		if r.Retriable() {
			t.Errorf("%s is retriable", r)
		}
	}
}
