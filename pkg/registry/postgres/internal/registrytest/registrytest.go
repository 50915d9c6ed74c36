// Package registrytest holds what the tests that run the whole registry
// share: a migrated Store (package postgres) on a fresh database, records
// to write, and reads to check. The tests of package postgres and of the
// mechanisms below it (package writes, package usage) use it from their
// external test packages; the mechanisms' own internal tests cannot (an
// import cycle) and use package pgtesting.
package registrytest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// Bundle is what Setup returns beside the store.
type Bundle struct {
	Ctx context.Context //nolint:containedctx // the test's context, cancelled by t.Cleanup
	DSN string
}

// Setup returns a migrated store on a fresh database.
func Setup(t *testing.T, opts postgres.Options) (*postgres.Store, Bundle) {
	t.Helper()
	s, b := SetupUnmigrated(t, opts)
	if err := s.Migrate(b.Ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s, b
}

// SetupUnmigrated returns a store on a fresh database, not migrated.
func SetupUnmigrated(t *testing.T, opts postgres.Options) (*postgres.Store, Bundle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dsn := pgtest.NewTestDatabase(t)
	s, err := postgres.Open(ctx, dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s, Bundle{Ctx: ctx, DSN: dsn}
}

// Connect opens a connection of the test's own to its database, closed
// when the test ends.
func (b Bundle) Connect(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(b.Ctx, b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// CountRows runs sql, a query of one count, on a connection of its own.
func CountRows(t *testing.T, b Bundle, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := QueryRow(t, b, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// QueryRow runs sql on a connection of its own.
func QueryRow(t *testing.T, b Bundle, sql string, args ...any) pgx.Row {
	t.Helper()
	return b.Connect(t).QueryRow(b.Ctx, sql, args...)
}

// QueryExec runs sql on a connection it closes after, and returns the rows
// it affected.
func QueryExec(t *testing.T, b Bundle, sql string, args ...any) (int64, error) {
	t.Helper()
	conn, err := pgx.Connect(b.Ctx, b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(b.Ctx)
	tag, err := conn.Exec(b.Ctx, sql, args...)
	return tag.RowsAffected(), err
}

// MustApply applies b, failing the test on an error.
func MustApply(t *testing.T, s *postgres.Store, ctx context.Context, b store.Batch) {
	t.Helper()
	if err := s.Apply(ctx, b); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// GetNode returns a node's view, failing the test on an error.
func GetNode(t *testing.T, s *postgres.Store, ctx context.Context, cluster, name string) *store.NodeCapacity {
	t.Helper()
	n, err := s.GetNodeCapacity(ctx, cluster, name)
	if err != nil {
		t.Fatalf("GetNodeCapacity(%s, %s): %v", cluster, name, err)
	}
	return n
}

// GetNamespace returns a namespace's view, failing the test on an error.
func GetNamespace(t *testing.T, s *postgres.Store, ctx context.Context, cluster, name string) *store.ClusterNamespace {
	t.Helper()
	n, err := s.GetClusterNamespace(ctx, name, cluster)
	if err != nil {
		t.Fatalf("GetClusterNamespace(%s, %s): %v", name, cluster, err)
	}
	return n
}

// MustCapacity returns a member's ClusterCapacity, failing the test on an
// error.
func MustCapacity(t *testing.T, s *postgres.Store, ctx context.Context, cluster string) *store.ClusterCapacity {
	t.Helper()
	c, err := s.GetClusterCapacity(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ListNodes lists NodeCapacities, failing the test on an error.
func ListNodes(t *testing.T, s *postgres.Store, ctx context.Context, opts store.ListOptions) *store.Page[store.NodeCapacity] {
	t.Helper()
	p, err := s.NodeCapacities().List(ctx, opts)
	if err != nil {
		t.Fatalf("ListNodeCapacities: %v", err)
	}
	return p
}

// RegistryRV is the registry's resourceVersion, as a list returns it.
func RegistryRV(t *testing.T, s *postgres.Store, ctx context.Context) int64 {
	t.Helper()
	return ListNodes(t, s, ctx, store.ListOptions{Limit: 1}).ResourceVersion
}

// RemoveMember removes a member at once, as the registry does once no
// configuration has listed it for the grace period.
func RemoveMember(t *testing.T, s *postgres.Store, ctx context.Context, id string) {
	t.Helper()
	res, err := s.ReconcileMembers(ctx, store.MembersView{Unconfigured: []string{id}})
	if err != nil || !slices.Equal(res.RemovedNow, []string{id}) {
		t.Fatalf("remove member %s: %+v, %v", id, res, err)
	}
}

// Relist lists a removed member anew, as a configuration that names it
// again does, so it may be claimed.
func Relist(t *testing.T, s *postgres.Store, ctx context.Context, id string) {
	t.Helper()
	if _, err := s.ReconcileMembers(ctx, store.MembersView{Configured: []string{id}, Listed: []string{id}}); err != nil {
		t.Fatalf("list member %s anew: %v", id, err)
	}
}

// NodeKeys names the nodes, "cluster.node", comma-separated.
func NodeKeys(items []store.NodeCapacity) string {
	keys := make([]string, len(items))
	for i, n := range items {
		keys[i] = n.ClusterID + "." + n.Node.Name
	}
	return strings.Join(keys, ",")
}

// NamespaceKeys names the namespaces, "namespace/cluster", comma-separated.
func NamespaceKeys(items []store.ClusterNamespace) string {
	keys := make([]string, len(items))
	for i, n := range items {
		keys[i] = n.Namespace.Name + "/" + n.ClusterID
	}
	return strings.Join(keys, ",")
}

// ReportEvery reports every newer sample, as usage was before reporting.
var ReportEvery = store.UsageReporting{Threshold: 0, Period: time.Nanosecond}

// Poll waits until cond holds, failing the test after 10 s.
func Poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Nodes of the metrics tests: 2000m and 8Gi allocatable, so the default
// 5% threshold is 100m CPU and ~410Mi memory.
const (
	MetricsNodeCPU = 2080
	MetricsNodeMem = 8<<30 + 1<<20
	Gib            = int64(1) << 30
)

// Policy is the metrics tests' reporting policy: 5% or 5 minutes.
var Policy = store.UsageReporting{Threshold: 0.05, Period: 5 * time.Minute}

// NodeNameN names the metrics tests' node i.
func NodeNameN(i int) string { return fmt.Sprintf("n%04d", i) }

// CommitsInParts is how many transactions a write in parts (writes.ViewRowsPerCommit
// rows each) of n rows takes.
func CommitsInParts(n int) int64 {
	return int64((n + writes.ViewRowsPerCommit - 1) / writes.ViewRowsPerCommit)
}

// AsNode, AsNamespace and AsCapacity are a change's record of that kind,
// nil for none.
func AsNode(o any) *store.NodeCapacity          { n, _ := o.(*store.NodeCapacity); return n }
func AsNamespace(o any) *store.ClusterNamespace { n, _ := o.(*store.ClusterNamespace); return n }
func AsCapacity(o any) *store.ClusterCapacity   { c, _ := o.(*store.ClusterCapacity); return c }

// WithLabel is n with label k=v added.
func WithLabel(n store.Node, k, v string) store.Node {
	labels := map[string]string{}
	maps.Copy(labels, n.Labels)
	labels[k] = v
	n.Labels = labels
	return n
}

// ChangeKey names a change's object: "node/<cluster>/<name>",
// "ns/<cluster>/<name>" or "cc/<cluster>/<cluster>".
func ChangeKey(c store.Change) string {
	switch c.Kind {
	case store.KindNodeCapacity:
		return "node/" + AsNode(c.Object).ClusterID + "/" + AsNode(c.Object).Node.Name
	case store.KindClusterCapacity:
		return "cc/" + AsCapacity(c.Object).ClusterID + "/" + AsCapacity(c.Object).ClusterID
	default:
		return "ns/" + AsNamespace(c.Object).ClusterID + "/" + AsNamespace(c.Object).Namespace.Name
	}
}

// SameSet reports whether a and b hold the same strings, in any order.
func SameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
