// Package pgtesting holds what the tests of the registry's storage
// packages share: records to write and checks of a package's embedded SQL.
package pgtesting

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// created is every record's creation time.
var created = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// GPUDriver is the DRA driver, and GPUClass the device class, of the
// devices ResourceSlice and Claim make.
const GPUDriver, GPUClass = "gpu.example.com", "gpu.example.com"

// Node is a Ready node with cpu millicores and mem bytes of capacity, a
// little less allocatable, and 110 pods.
func Node(name string, cpu, mem int64) store.Node {
	return store.Node{
		Name:        name,
		UID:         "uid-" + name,
		Labels:      map[string]string{"kubernetes.io/hostname": name},
		CreatedAt:   created,
		Capacity:    store.Quantities{CPUMillis: cpu, MemoryBytes: mem, Pods: 110},
		Allocatable: store.Quantities{CPUMillis: cpu - 80, MemoryBytes: mem - 1<<20, Pods: 110},
		Ready:       true,
		Conditions:  []store.NodeCondition{{Type: "Ready", Status: "True", LastTransitionTime: created}},
	}
}

// Namespace is an Active namespace labelled team=name.
func Namespace(name string) store.Namespace {
	return store.Namespace{Name: name, UID: "uid-" + name, Phase: "Active", Labels: map[string]string{"team": name}, CreatedAt: created}
}

// Pod is a Running pod on nodeName requesting cpu millicores and mem bytes.
func Pod(ns, name, nodeName string, cpu, mem int64) store.Pod {
	return store.Pod{Namespace: ns, Name: name, UID: "uid-" + name, NodeName: nodeName, Phase: "Running",
		CPURequestMillis: cpu, MemoryRequestBytes: mem}
}

// ResourceSlice is a node-local ResourceSlice of GPUDriver whose pool is
// the node's, with devices gpu-0 to gpu-<n-1>.
func ResourceSlice(name, nodeName string, generation int64, n int) store.ResourceSlice {
	s := store.ResourceSlice{Name: name, NodeName: nodeName, Driver: GPUDriver, Pool: nodeName, PoolGeneration: generation}
	for i := range n {
		s.Devices = append(s.Devices, fmt.Sprintf("gpu-%d", i))
	}
	return s
}

// Claim is a ResourceClaim of GPUClass holding devices of pool.
func Claim(ns, name, pool string, devices ...string) store.ResourceClaim {
	c := store.ResourceClaim{Namespace: ns, Name: name, UID: "uid-" + name, Classes: map[string]int64{GPUClass: int64(len(devices))}}
	for _, d := range devices {
		c.Allocated = append(c.Allocated, store.DeviceRef{Driver: GPUDriver, Pool: pool, Device: d})
	}
	return c
}

// CheckStatementsLoaded fails t unless every file the loader embeds was
// loaded (as a statement or an include) and no statement kept a header or
// an include.
func CheckStatementsLoaded(t testing.TB, l *pgdb.Loader) {
	t.Helper()
	unused, err := l.Unused()
	if err != nil {
		t.Fatalf("embedded SQL files: %v", err)
	}
	for _, f := range unused {
		t.Errorf("%s is embedded but no statement loads it", f)
	}
	for name, sql := range l.Statements() {
		if strings.Contains(sql, "{{") || strings.HasPrefix(sql, "--") || sql != strings.TrimSpace(sql) {
			t.Errorf("statement %s was not expanded or stripped: %q", name, sql)
		}
	}
}

// CheckStatementsPrepare fails t unless every statement the loader loaded
// parses and type-checks on conn (a migrated registry).
func CheckStatementsPrepare(ctx context.Context, t testing.TB, conn *pgx.Conn, l *pgdb.Loader) {
	t.Helper()
	loaded := l.Statements()
	for _, name := range slices.Sorted(maps.Keys(loaded)) {
		if _, err := conn.Prepare(ctx, name, loaded[name]); err != nil {
			t.Errorf("prepare %s: %v", name, err)
		}
	}
}

// MigratedConn is a connection to a fresh test database that migrate (the
// schema's Migrate; this package cannot import it) has migrated, released
// when the test ends.
func MigratedConn(t testing.TB, migrate func(context.Context, *pgxpool.Conn, ...fs.FS) error) *pgxpool.Conn {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.NewTestDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if err := migrate(t.Context(), conn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return conn
}

// Pool is a pool of 8 connections to dsn, as the store's writes pool,
// with configure applied to its configuration (the write protocol:
// schema.SetWriteProtocol), closed when the test ends.
func Pool(t testing.TB, dsn string, configure func(*pgxpool.Config)) *pgdb.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	configure(cfg)
	pool, err := pgdb.NewPool(context.Background(), "writes", cfg, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// MigratedPool is a Pool on a fresh test database that migrate has
// migrated.
func MigratedPool(t testing.TB, migrate func(context.Context, *pgxpool.Conn, ...fs.FS) error, configure func(*pgxpool.Config)) *pgdb.Pool {
	t.Helper()
	pool := Pool(t, pgtest.NewTestDatabase(t), configure)
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if err := migrate(t.Context(), conn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return pool
}

// Rescans plans query with args on q (EXPLAIN, the plan it would run) and
// describes each nested loop whose inner side scans a CTE or a function:
// the batch a statement decodes from its parameter, read again for every
// row of the outer side, a cost quadratic in the batch.
func Rescans(t testing.TB, ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, query string, args ...any) []string {
	t.Helper()
	var doc []struct{ Plan planNode }
	if err := q.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	doc[0].Plan.each(func(p planNode) {
		if p.NodeType != "Nested Loop" || len(p.Plans) != 2 {
			return
		}
		p.Plans[1].each(func(inner planNode) {
			if inner.NodeType == "CTE Scan" || inner.NodeType == "Function Scan" {
				out = append(out, fmt.Sprintf("%s %s join rescans %s %s%s", p.NodeType, p.JoinType, inner.NodeType, inner.CTEName, inner.FunctionName))
			}
		})
	})
	return out
}

// planNode is a node of EXPLAIN (FORMAT JSON); each visits it and every
// node below it.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	JoinType     string     `json:"Join Type"`
	CTEName      string     `json:"CTE Name"`
	FunctionName string     `json:"Function Name"`
	Plans        []planNode `json:"Plans"`
}

func (p planNode) each(f func(planNode)) {
	f(p)
	for _, c := range p.Plans {
		c.each(f)
	}
}

// SyncBuffer is a log destination tests read while connections write.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
