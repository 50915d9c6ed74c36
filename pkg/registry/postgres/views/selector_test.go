package views

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/example/platform-apiserver/pkg/registry/clusternamespace"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestLabelSelectorSQL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		selector string
		want     string
		args     []any
	}{
		{name: "equals", selector: "app=web", want: `(labels @> $1::jsonb)`, args: []any{`{"app":"web"}`}},
		{name: "double equals", selector: "app==web", want: `(labels @> $1::jsonb)`, args: []any{`{"app":"web"}`}},
		{name: "in", selector: "app in (b,a)", want: `(labels @> ANY($1::jsonb[]))`, args: []any{[]string{`{"app":"a"}`, `{"app":"b"}`}}},
		{name: "in one value", selector: "app in (a)", want: `(labels @> $1::jsonb)`, args: []any{`{"app":"a"}`}},
		{name: "not equals", selector: "app!=web", want: `NOT (labels @> $1::jsonb)`, args: []any{`{"app":"web"}`}},
		{name: "notin one value", selector: "app notin (a)", want: `NOT (labels @> $1::jsonb)`, args: []any{`{"app":"a"}`}},
		{name: "notin", selector: "app notin (b,a)", want: `NOT coalesce((labels->>$1) = ANY($2::text[]), false)`, args: []any{"app", []string{"a", "b"}}},
		{name: "exists", selector: "app", want: `labels ? $1`, args: []any{"app"}},
		{name: "does not exist", selector: "!app", want: `NOT (labels ? $1)`, args: []any{"app"}},
		{name: "gt", selector: "size>3", want: `(CASE WHEN (labels->>$1) ~ '^[+-]?[0-9]{1,19}$' THEN (labels->>$1)::numeric BETWEEN -9223372036854775808 AND 9223372036854775807 AND (labels->>$1)::numeric > $2::bigint ELSE false END)`, args: []any{"size", int64(3)}},
		{name: "lt", selector: "size<3", want: `(CASE WHEN (labels->>$1) ~ '^[+-]?[0-9]{1,19}$' THEN (labels->>$1)::numeric BETWEEN -9223372036854775808 AND 9223372036854775807 AND (labels->>$1)::numeric < $2::bigint ELSE false END)`, args: []any{"size", int64(3)}},
		{name: "cluster equals", selector: ClusterLabel + "=prod-1", want: `(cluster_id = ANY($1::text[]))`, args: []any{[]string{"prod-1"}}},
		{name: "cluster notin", selector: ClusterLabel + " notin (a,b)", want: `NOT (cluster_id = ANY($1::text[]))`, args: []any{[]string{"a", "b"}}},
		{name: "cluster exists", selector: ClusterLabel, want: `(true)`},
		{name: "cluster does not exist", selector: "!" + ClusterLabel, want: `(false)`},
		{name: "quote in value is a bind parameter", selector: "app=it.s", want: `(labels @> $1::jsonb)`, args: []any{`{"app":"it.s"}`}},
		{name: "two requirements", selector: "a=1,!b", want: `(labels @> $1::jsonb) AND NOT (labels ? $2)`, args: []any{`{"a":"1"}`, "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reqs, err := labels.ParseToRequirements(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			var args pgdb.Args
			conds, err := SelectorSQL(&args, reqs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(conds, " AND "); got != tc.want {
				t.Errorf("SQL:\n got %s\nwant %s", got, tc.want)
			}
			if !equalArgs(args, tc.args) {
				t.Errorf("args: got %#v, want %#v", []any(args), tc.args)
			}
		})
	}
}

func TestFieldSelectorSQL(t *testing.T) {
	t.Parallel()
	eq, ne := selection.Equals, selection.NotEquals
	tests := []struct {
		name    string
		field   store.FieldRequirement
		want    string
		args    []any
		wantErr string
	}{
		{name: "node name", field: store.FieldRequirement{Field: nodecapacity.Kind.MustField("metadata.name"), Op: eq, Value: "prod-1.node.a"},
			want: `(cluster_id = $1 AND name = $2)`, args: []any{"prod-1", "node.a"}},
		{name: "node name not equal", field: store.FieldRequirement{Field: nodecapacity.Kind.MustField("metadata.name"), Op: ne, Value: "prod-1.a"},
			want: `NOT (cluster_id = $1 AND name = $2)`, args: []any{"prod-1", "a"}},
		{name: "node name without dot", field: store.FieldRequirement{Field: nodecapacity.Kind.MustField("metadata.name"), Op: eq, Value: "nodot"}, want: `(false)`},
		{name: "node name without dot not equal", field: store.FieldRequirement{Field: nodecapacity.Kind.MustField("metadata.name"), Op: ne, Value: "nodot"}, want: `(true)`},
		{name: "node cluster", field: store.FieldRequirement{Field: nodecapacity.Kind.MustField("status.cluster"), Op: selection.DoubleEquals, Value: "c"}, want: `(cluster_id = $1)`, args: []any{"c"}},
		{name: "node nodeName", field: store.FieldRequirement{Field: nodecapacity.Kind.MustField("status.nodeName"), Op: ne, Value: "n"}, want: `(name <> $1)`, args: []any{"n"}},
		{name: "schedulable", field: store.FieldRequirement{Field: nodecapacity.Kind.MustField("status.schedulable"), Op: eq, Value: "false"}, want: `(schedulable = $1)`, args: []any{false}},
		{name: "schedulable bad value", field: store.FieldRequirement{Field: nodecapacity.Kind.MustField("status.schedulable"), Op: eq, Value: "yes"}, wantErr: `not "true" or "false"`},
		{name: "bad operator", field: store.FieldRequirement{Field: nodecapacity.Kind.MustField("status.cluster"), Op: selection.In, Value: "x"}, wantErr: `operator "in" is not supported`},
		{name: "namespace name is cluster", field: store.FieldRequirement{Field: clusternamespace.Kind.MustField("metadata.name"), Op: eq, Value: "c"}, want: `(cluster_id = $1)`, args: []any{"c"}},
		{name: "namespace namespace", field: store.FieldRequirement{Field: clusternamespace.Kind.MustField("metadata.namespace"), Op: eq, Value: "team-a"}, want: `(name = $1)`, args: []any{"team-a"}},
		{name: "namespace cluster", field: store.FieldRequirement{Field: clusternamespace.Kind.MustField("status.cluster"), Op: ne, Value: "c"}, want: `(cluster_id <> $1)`, args: []any{"c"}},
		{name: "namespace phase", field: store.FieldRequirement{Field: clusternamespace.Kind.MustField("status.phase"), Op: eq, Value: "Active"}, want: `(phase = $1)`, args: []any{"Active"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var args pgdb.Args
			conds, err := SelectorSQL(&args, nil, []store.FieldRequirement{tc.field})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error: got %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(conds, " AND "); got != tc.want {
				t.Errorf("SQL:\n got %s\nwant %s", got, tc.want)
			}
			if !equalArgs(args, tc.args) {
				t.Errorf("args: got %#v, want %#v", []any(args), tc.args)
			}
		})
	}
}

func equalArgs(got pgdb.Args, want []any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if g, ok := got[i].([]string); ok {
			w, ok := want[i].([]string)
			if !ok || strings.Join(g, "\x00") != strings.Join(w, "\x00") {
				return false
			}
			continue
		}
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// FuzzLabelSelectorSQL checks that any selector labels.Parse accepts
// translates without panicking and that every placeholder has an argument.
func FuzzLabelSelectorSQL(f *testing.F) {
	for _, s := range []string{"", "a=b", "a in (x,y),!b", "x>1", "y<-2", ClusterLabel + "!=p", "a,b notin (c)", `a=b,c=="d"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := labels.Parse(s)
		if err != nil {
			return
		}
		reqs, _ := sel.Requirements()
		var args pgdb.Args
		conds, err := SelectorSQL(&args, reqs, nil)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, p := range placeholder.FindAllString(strings.Join(conds, " AND "), -1) {
			seen[p] = true
		}
		if len(seen) != len(args) {
			t.Fatalf("%q: %d distinct placeholders for %d args: %v", s, len(seen), len(args), conds)
		}
		for i := 1; i <= len(args); i++ {
			if !seen["$"+strconv.Itoa(i)] {
				t.Fatalf("%q: placeholder $%d unused: %v", s, i, conds)
			}
		}
	})
}

var placeholder = regexp.MustCompile(`\$[0-9]+`)
