package views_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestSelectorValuesArrayParameter: an in or notin of thousands of values
// is one bind parameter (two with its key), answers as Kubernetes does
// (notin matches objects without the key), and an in keeps the GIN index
// on labels, also next to a notin.
func TestSelectorValuesArrayParameter(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	var nodes []store.Node
	for i := range 40 {
		n := store.Node{Name: fmt.Sprintf("n%02d", i), UID: fmt.Sprintf("uid-%d", i), Labels: map[string]string{"pool": fmt.Sprintf("p%d", i%4)}}
		if i%5 == 0 {
			n.Labels = nil
		}
		nodes = append(nodes, n)
	}
	if err := s.Apply(ctx, store.Batch{ClusterID: "c1", Nodes: nodes}); err != nil {
		t.Fatal(err)
	}
	many := func(first string) string {
		values := []string{first}
		for i := range 29999 {
			values = append(values, fmt.Sprintf("v%d", i))
		}
		return strings.Join(values, ",")
	}
	for _, tc := range []struct {
		selector string
		want     int
	}{
		{"pool in (" + many("p1") + ")", 8},          // n01, n09, ... without the unlabelled
		{"pool notin (" + many("p1") + ")", 32},      // every other, the unlabelled included
		{"pool notin (" + many("p1") + "),pool", 24}, // labelled, not p1
	} {
		reqs, err := labels.ParseToRequirements(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		var args pgdb.Args
		if _, err := views.SelectorSQL(&args, reqs, nil); err != nil {
			t.Fatal(err)
		}
		if len(args) > 2*len(reqs) {
			t.Errorf("%.40s...: %d bind parameters for %d requirements", tc.selector, len(args), len(reqs))
		}
		page, err := s.NodeCapacities().List(ctx, store.ListOptions{Labels: reqs})
		if err != nil {
			t.Fatalf("%.40s...: %v", tc.selector, err)
		}
		if len(page.Items) != tc.want {
			t.Errorf("%.40s...: %d nodes, want %d", tc.selector, len(page.Items), tc.want)
		}
	}

	// The plan, with sequential scans made unattractive: a table this
	// small would be scanned anyway, what matters is that the index can
	// serve the in.
	conn := b.Connect(t)
	for _, sel := range []string{"pool in (p1,p2)", "pool in (p1,p2),pool notin (" + many("p3") + ")"} {
		reqs, _ := labels.ParseToRequirements(sel)
		var args pgdb.Args
		conds, _ := views.SelectorSQL(&args, reqs, nil)
		plan := explain(t, ctx, conn, "SELECT name FROM cluster_node WHERE "+strings.Join(conds, " AND "), args)
		if !strings.Contains(plan, "cluster_node_labels_idx") {
			t.Errorf("%.40s...: the plan does not use the labels index:\n%s", sel, plan)
		}
	}
}

func explain(t *testing.T, ctx context.Context, conn *pgx.Conn, query string, args []any) string {
	t.Helper()
	var lines []string
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+query, args...)
		if err != nil {
			return err
		}
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
