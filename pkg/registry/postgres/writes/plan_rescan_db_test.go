package writes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestAbsentRowsOfAMemberNewToTheStatistics: a relist's "what is gone"
// statements answer right and plan no nested loop for a member whose rows
// the statistics have not seen yet (a member added since the last ANALYZE,
// every member of a large fleet outside the most common values). As
// anti-joins they planned one there: the member's rows estimated at one,
// the relist's keys at a hundred, and a relist of 20,000 pods compared
// every pod with every key (2.7 s a relist in the fleet benchmark).
func TestAbsentRowsOfAMemberNewToTheStatistics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e, pool := migratedEngine(t)
	tables := []string{"cluster_namespace", "cluster_node", "cluster_pod", "cluster_resource_quota", "cluster_resource_slice", "cluster_resource_claim"}
	for _, table := range tables {
		// No analyze of its own between the two members' writes.
		if _, err := pool.Exec(ctx, "ALTER TABLE "+table+" SET (autovacuum_enabled = false)"); err != nil {
			t.Fatal(err)
		}
	}
	const n = 1000
	member := func(id string) store.Batch {
		b := store.Batch{ClusterID: id}
		for i := range n {
			ns, name := fmt.Sprintf("ns-%d", i), fmt.Sprintf("o-%04d", i)
			b.Namespaces = append(b.Namespaces, store.Namespace{Name: ns, UID: id + ns})
			b.Nodes = append(b.Nodes, store.Node{Name: name, UID: id + name})
			b.Pods = append(b.Pods, store.Pod{Namespace: ns, Name: name, UID: id + "pod" + name})
			b.Quotas = append(b.Quotas, store.Quota{Namespace: ns, Name: name})
			b.Slices = append(b.Slices, store.ResourceSlice{Name: name, Driver: "gpu.example.com", Pool: name, Devices: []string{"d0"}})
			b.Claims = append(b.Claims, store.ResourceClaim{Namespace: ns, Name: name, UID: id + "claim" + name})
		}
		return b
	}
	if err := e.Apply(ctx, member("known")); err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		if _, err := pool.Exec(ctx, "ANALYZE "+table); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Apply(ctx, member("new")); err != nil {
		t.Fatal(err)
	}

	// A relist that no longer finds the first three objects of each kind.
	var present []store.ObjectKey
	for i := 3; i < n; i++ {
		present = append(present, store.ObjectKey{Namespace: fmt.Sprintf("ns-%d", i), Name: fmt.Sprintf("o-%04d", i)})
	}
	gone := func(namespaced bool) []store.ObjectKey {
		var out []store.ObjectKey
		for i := range 3 {
			k := store.ObjectKey{Name: fmt.Sprintf("o-%04d", i)}
			if namespaced {
				k.Namespace = fmt.Sprintf("ns-%d", i)
			}
			out = append(out, k)
		}
		return out
	}
	var presentNamespaces []store.ObjectKey
	for _, k := range present {
		presentNamespaces = append(presentNamespaces, store.ObjectKey{Name: k.Namespace})
	}
	goneNamespaces := []store.ObjectKey{{Name: "ns-0"}, {Name: "ns-1"}, {Name: "ns-2"}}
	names := func(keys []store.ObjectKey) []store.ObjectKey {
		out := make([]store.ObjectKey, len(keys))
		for i, k := range keys {
			out[i] = store.ObjectKey{Name: k.Name}
		}
		return out
	}
	for _, tc := range []struct {
		what, sql     string
		present, want []store.ObjectKey
		namespaced    bool
	}{
		{"namespaces", sqlAbsentNamespaces, presentNamespaces, goneNamespaces, false},
		{"nodes", sqlAbsentNodes, names(present), gone(false), false},
		{"slices", sqlAbsentSlices, names(present), gone(false), false},
		{"pods", sqlAbsentPods, present, gone(true), true},
		{"quotas", sqlAbsentQuotas, present, gone(true), true},
		{"claims", sqlAbsentClaims, present, gone(true), true},
	} {
		var param any = keyNames(tc.present)
		if tc.namespaced {
			keys, err := keyRows(tc.present)
			if err != nil {
				t.Fatal(err)
			}
			if param, err = JSONRows(keys); err != nil {
				t.Fatal(err)
			}
		}
		if loops := pgtesting.Rescans(t, ctx, pool, tc.sql, "new", param); len(loops) > 0 {
			t.Errorf("absent %s, a member the statistics do not know: %s", tc.what, strings.Join(loops, "; "))
		}
		got, err := absent(ctx, pool, "new", tc.what, tc.sql, tc.present, tc.namespaced)
		if err != nil {
			t.Fatalf("absent %s: %v", tc.what, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("absent %s: %v, want %v", tc.what, got, tc.want)
		}
	}
}

// absent runs an apply_absent_* statement as a relist's last batch does
// (applier.absentKeys for namespaced kinds, absentNames for the others)
// and returns its keys in order.
func absent(ctx context.Context, pool *pgdb.Pool, member, what, sql string, present []store.ObjectKey, namespaced bool) ([]store.ObjectKey, error) {
	var keys []store.ObjectKey
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		a := newApplier(store.Batch{ClusterID: member})
		a.Writer = &Writer{ctx: ctx, tx: tx}
		var err error
		if namespaced {
			keys, err = a.absentKeys(what, sql, present)
		} else {
			keys, err = a.absentNames(what, sql, present)
		}
		return err
	})
	slices.SortFunc(keys, func(a, b store.ObjectKey) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return keys, err
}

// TestAggregatesLookUpWrittenNamesByHash: the aggregate statements find the
// batch's written rows among the rows they compute by a hashed lookup of
// the names, also in a generic plan (which PostgreSQL switches a prepared
// statement to after five runs), where = ANY($2) compared every row with
// every name: 5,000 nodes and 1,000 names took 116-133 ms instead of 49-56.
func TestAggregatesLookUpWrittenNamesByHash(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := migratedEngine(t)
	keys, err := JSONRows(pairs{{"m", "a"}: {}, {"m", "b"}: {}}.rows())
	if err != nil {
		t.Fatal(err)
	}
	for what, sql := range map[string]string{"aggregates_nodes": sqlAggregateNodes, "aggregates_namespaces": sqlAggregateNamespaces} {
		var plan string
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "PREPARE aggregates AS "+sql); err != nil {
				return err
			}
			// EXECUTE takes no bind parameters; keys holds no quote.
			err := tx.QueryRow(ctx, "EXPLAIN (VERBOSE, FORMAT JSON) EXECUTE aggregates('"+string(keys)+"', '{a}')").Scan(&plan)
			if _, deallocate := tx.Exec(ctx, "DEALLOCATE aggregates"); err == nil {
				err = deallocate
			}
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, scan := range []string{"ANY ($2", "ALL ($2"} {
			if strings.Contains(plan, scan) {
				t.Errorf("%s: the generic plan compares rows with every written name (%s...)", what, scan)
			}
		}
	}
}
