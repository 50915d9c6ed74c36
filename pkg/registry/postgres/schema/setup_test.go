package schema_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// The helpers below are those of package postgres's tests that the upgrade
// test writes a registry with.

// testBundle is what setupUnmigrated returns beside the store.
type testBundle struct {
	ctx context.Context //nolint:containedctx // the test's context, cancelled by t.Cleanup
	dsn string
}

// setupUnmigrated returns a store on a fresh database, not migrated.
func setupUnmigrated(t *testing.T, opts postgres.Options) (*postgres.Store, testBundle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dsn := pgtest.NewTestDatabase(t)
	s, err := postgres.Open(ctx, dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s, testBundle{ctx: ctx, dsn: dsn}
}

// connect opens a connection of the test's own to its database, closed
// when the test ends.
func (b testBundle) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(b.ctx, b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// migrationConn is a pooled connection to the test's database for the
// migrations, released when the test ends.
func (b testBundle) migrationConn(t *testing.T) *pgxpool.Conn {
	t.Helper()
	pool, err := pgxpool.New(b.ctx, b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	conn, err := pool.Acquire(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}

var policy = store.UsageReporting{Threshold: 0.05, Period: 5 * time.Minute}

const gpuDriver, gpuClass = "gpu.example.com", "gpu.example.com"

func mustApply(t *testing.T, s *postgres.Store, ctx context.Context, b store.Batch) {
	t.Helper()
	if err := s.Apply(ctx, b); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func node(name string, cpu, mem int64) store.Node {
	return store.Node{
		Name:        name,
		UID:         "uid-" + name,
		Labels:      map[string]string{"kubernetes.io/hostname": name},
		CreatedAt:   time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Capacity:    store.Resources{CPUMillis: cpu, MemoryBytes: mem, Pods: 110},
		Allocatable: store.Resources{CPUMillis: cpu - 80, MemoryBytes: mem - 1<<20, Pods: 110},
		Ready:       true,
		Conditions:  []store.NodeCondition{{Type: "Ready", Status: "True", LastTransitionTime: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}},
	}
}

func namespace(name string) store.Namespace {
	return store.Namespace{Name: name, UID: "uid-" + name, Phase: "Active", Labels: map[string]string{"team": name},
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func pod(ns, name, nodeName string, cpu, mem int64) store.Pod {
	return store.Pod{Namespace: ns, Name: name, UID: "uid-" + name, NodeName: nodeName, Phase: "Running",
		CPURequestMillis: cpu, MemoryRequestBytes: mem}
}

// slice is a node-local ResourceSlice of gpu.example.com whose pool is
// the node's, with devices gpu-0 to gpu-<n-1>.
func slice(name, nodeName string, generation int64, n int) store.ResourceSlice {
	s := store.ResourceSlice{Name: name, NodeName: nodeName, Driver: gpuDriver, Pool: nodeName, PoolGeneration: generation}
	for i := range n {
		s.Devices = append(s.Devices, fmt.Sprintf("gpu-%d", i))
	}
	return s
}

// claim is a ResourceClaim of gpuClass holding devices of pool.
func claim(ns, name, pool string, devices ...string) store.ResourceClaim {
	c := store.ResourceClaim{Namespace: ns, Name: name, UID: "uid-" + name, Classes: map[string]int64{gpuClass: int64(len(devices))}}
	for _, d := range devices {
		c.Allocated = append(c.Allocated, store.DeviceRef{Driver: gpuDriver, Pool: pool, Device: d})
	}
	return c
}

func getNode(t *testing.T, s *postgres.Store, ctx context.Context, cluster, name string) *store.NodeCapacity {
	t.Helper()
	n, err := s.GetNodeCapacity(ctx, cluster, name)
	if err != nil {
		t.Fatalf("GetNodeCapacity(%s, %s): %v", cluster, name, err)
	}
	return n
}

func registryRV(t *testing.T, s *postgres.Store, ctx context.Context) int64 {
	t.Helper()
	p, err := s.NodeCapacities().List(ctx, store.ListOptions{Limit: 1})
	if err != nil {
		t.Fatalf("ListNodeCapacities: %v", err)
	}
	return p.ResourceVersion
}
