package schema_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// schemaFile is the checked-in schema (hack/update-schema.sh writes it).
const schemaFile = "schema.sql"

// lastMigrationBeforeSources is the newest migration of the releases that
// had no function sources (main before issue 51).
const lastMigrationBeforeSources = 28

// TestSchemaIsAFreshMigration: schema.sql is the schema of an empty
// database migrated by Store.Migrate.
func TestSchemaIsAFreshMigration(t *testing.T) {
	t.Parallel()
	s, b := setupUnmigrated(t, postgres.Options{})
	if err := s.Migrate(b.Ctx); err != nil {
		t.Fatal(err)
	}
	checkSchemaFile(t, "a fresh migration", dumpSchema(t, b))
}

// TestSchemaUpgradeFromReleaseBeforeSources: a registry migrated and written
// by a release from before the function sources upgrades in place to
// exactly schema.sql, every row of every table intact, and works on.
//
// That release's registry is made by this binary's migrations 001 to 028
// without the function sources: they are main's as of 0dfaf63 (migrations
// 023 and 025 now state the bodies they set instead of rewriting others'
// text, with the same result, which a dump after every up and down step
// showed when they changed), so the test needs neither git history nor a
// copy of the old schema.
func TestSchemaUpgradeFromReleaseBeforeSources(t *testing.T) {
	t.Parallel()
	s, b := setupUnmigrated(t, postgres.Options{})
	ctx := b.Ctx
	if err := schema.MigrateThrough(ctx, b.migrationConn(t), lastMigrationBeforeSources); err != nil {
		t.Fatal(err)
	}
	conn := b.Connect(t)
	var sourcesTable *string
	if err := conn.QueryRow(ctx, `SELECT to_regclass('registry_schema_sources')::text`).Scan(&sourcesTable); err != nil || sourcesTable != nil {
		t.Fatalf("before the upgrade: registry_schema_sources %v, %v; want none", sourcesTable, err)
	}

	// A member with a row in every table its writes reach. This binary's
	// claim and writer read and write quotas' scopes (migration 030), which
	// the release before had no column for: one stands in while it claims
	// and writes, and goes before the upgrade.
	if _, err := conn.Exec(ctx, `ALTER TABLE cluster_resource_quota ADD COLUMN scopes jsonb`); err != nil {
		t.Fatal(err)
	}
	fence, err := s.ClaimMember(ctx, "c", "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckMemberIdentity(ctx, fence, "uid-kube-system"); err != nil {
		t.Fatal(err)
	}
	batch := store.Batch{ClusterID: "c", Epoch: fence.Epoch, Failovers: fence.Failovers,
		Namespaces: []store.Namespace{namespace("a"), namespace("b")},
		Nodes:      []store.Node{node("n1", 4000, 8<<30), node("n2", 2000, 4<<30)},
		Pods:       []store.Pod{pod("a", "p1", "n1", 500, 1<<30), pod("b", "p2", "n2", 250, 1<<29), pod("a", "pending", "", 100, 1<<20)},
		Quotas:     []store.Quota{{Namespace: "a", Name: "compute", Hard: map[string]string{"requests.cpu": "2"}, Used: map[string]string{"requests.cpu": "600m"}}},
		Slices:     []store.ResourceSlice{slice("n1-gpus", "n1", 1, 4)},
		Claims:     []store.ResourceClaim{claim("a", "train", "n1", "gpu-0", "gpu-1")},
		Cursors:    map[store.Resource]string{store.ResourceNodes: "17", store.ResourcePods: "42"},
	}
	mustApply(t, s, ctx, batch)
	if _, err := conn.Exec(ctx, `ALTER TABLE cluster_resource_quota DROP COLUMN scopes`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if _, err := s.RecordNodeMetrics(ctx, fence, []store.NodeMetricsSample{
		{ClusterID: "c", Node: "n1", CPUNanoCores: 1.5e9, MemoryBytes: 3 << 30, ObservedAt: now.Add(-time.Minute)},
		{ClusterID: "c", Node: "n2", CPUNanoCores: 0.5e9, MemoryBytes: 1 << 30, ObservedAt: now},
	}, policy); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordNamespaceMetrics(ctx, fence, []store.NamespaceMetricsSample{
		{ClusterID: "c", Namespace: "a", CPUNanoCores: 0.4e9, MemoryBytes: 1 << 30, Pods: 1, ObservedAt: now},
	}, policy); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordMemberState(ctx, fence, store.MemberStatus{State: store.MemberSynced, LastUsage: now, CompleteAsOf: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: now, RetainAfter: now.Add(-time.Hour),
		UnknownBefore: now.Add(-5 * time.Minute), Interval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// A deletion, for a tombstone in the change log.
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Epoch: fence.Epoch, Failovers: fence.Failovers,
		Deleted: store.Keys{store.ResourceNamespaces: {{Name: "b"}}}})

	before := tableRows(t, b)
	migrationsBefore := before["schema_migrations"]
	delete(before, "schema_migrations") // the upgrade adds its own rows
	for _, table := range []string{"cluster_namespace", "cluster_node", "cluster_capacity", "cluster_pod", "cluster_resource_quota",
		"cluster_resource_slice", "cluster_resource_claim", "cluster_claim_device", "cluster_node_metrics", "cluster_node_usage_hourly",
		"cluster_namespace_usage_hourly", "discovery_cursor", "discovery_member", "registry_change", "registry_task"} {
		if before[table] == "[]" {
			t.Errorf("the test wrote no row to %s", table)
		}
	}
	version := registryRV(t, s, ctx)

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	after := tableRows(t, b)
	delete(after, "registry_schema_sources")
	if migrationsAfter := after["schema_migrations"]; !strings.HasPrefix(migrationsAfter, strings.TrimSuffix(migrationsBefore, "]")) {
		t.Errorf("schema_migrations's rows before the upgrade are not all kept:\nbefore %s\nafter  %s", migrationsBefore, migrationsAfter)
	}
	delete(after, "schema_migrations")
	// Migration 030 adds columns and backfills the committed quota: the
	// member's ClusterCapacity row changes at a new version, logged and
	// published; every other value stays.
	committed := after["cluster_capacity"]
	if !strings.Contains(committed, `"quota_hard": {"requests.cpu": 2}`) || !strings.Contains(committed, `"quota_used": {"requests.cpu": 0.6}`) {
		t.Errorf("ClusterCapacity after migration 030's backfill: %s; want quota_hard requests.cpu 2, quota_used 0.6", committed)
	}
	for table, keys := range map[string][]string{
		"cluster_capacity":       {"quota_hard", "quota_used", "quota_scoped_hard", "quota_scoped_used", "resource_version"},
		"cluster_resource_quota": {"scopes"},
		"registry_state":         {"resource_version"},
	} {
		before[table], after[table] = withoutKeys(t, before[table], keys...), withoutKeys(t, after[table], keys...)
	}
	after["registry_change"] = entriesThrough(t, after["registry_change"], version)
	for table, rows := range before {
		if after[table] != rows {
			t.Errorf("%s's rows changed in the upgrade:\nbefore %s\nafter  %s", table, rows, after[table])
		}
	}
	if len(after) != len(before) {
		t.Errorf("tables after the upgrade: %d, before: %d", len(after), len(before))
	}
	checkSchemaFile(t, "an upgrade of a registry before the function sources", dumpSchema(t, b))

	// It works on: a write is logged at a version past the old present.
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Epoch: fence.Epoch, Failovers: fence.Failovers,
		Nodes: []store.Node{node("n3", 8000, 16<<30)}})
	if n := getNode(t, s, ctx, "c", "n3"); n.ResourceVersion <= version {
		t.Errorf("a node written after the upgrade has version %d, not above %d", n.ResourceVersion, version)
	}
	c, err := s.GetClusterCapacity(ctx, "c")
	if err != nil || c.Nodes != 3 {
		t.Errorf("ClusterCapacity after the upgrade: %+v, %v; want 3 nodes", c, err)
	}
}

// tableRows reads every row of every table of the test's database, by
// table, as JSON in a stable order.
func tableRows(t *testing.T, b testBundle) map[string]string {
	t.Helper()
	conn := b.Connect(t)
	rows, err := conn.Query(b.Ctx, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(tables))
	for _, table := range tables {
		var j string
		if err := conn.QueryRow(b.Ctx, fmt.Sprintf(`SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY to_jsonb(t)::text), '[]')::text FROM %q t`, table)).Scan(&j); err != nil {
			t.Fatalf("rows of %s: %v", table, err)
		}
		out[table] = j
	}
	return out
}

// withoutKeys is rows (tableRows' JSON of a table) without the keys named,
// in a stable order.
func withoutKeys(t *testing.T, rows string, keys ...string) string {
	t.Helper()
	var objs []map[string]any
	if err := json.Unmarshal([]byte(rows), &objs); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(objs))
	for i, o := range objs {
		for _, k := range keys {
			delete(o, k)
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	slices.Sort(out)
	return "[" + strings.Join(out, ", ") + "]"
}

// entriesThrough is rows (tableRows' JSON of registry_change) without the
// entries above version, as tableRows has it.
func entriesThrough(t *testing.T, rows string, version int64) string {
	t.Helper()
	var objs []json.RawMessage
	if err := json.Unmarshal([]byte(rows), &objs); err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, o := range objs {
		var e struct {
			ResourceVersion int64 `json:"resource_version"`
		}
		if err := json.Unmarshal(o, &e); err != nil {
			t.Fatal(err)
		}
		if e.ResourceVersion <= version {
			kept = append(kept, string(o))
		}
	}
	return "[" + strings.Join(kept, ", ") + "]"
}

// dumpSchema is schema.DumpSchema of the test's database. schema.sql is
// a dump of PostgreSQL 15: on another server (TEST_DATABASE_URL) the test
// is skipped.
func dumpSchema(t *testing.T, b testBundle) string {
	t.Helper()
	var version int
	if err := b.Connect(t).QueryRow(b.Ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version/10000 != 15 {
		t.Skipf("%s is a dump of PostgreSQL 15; this server is %d", schemaFile, version)
	}
	dump, err := schema.DumpSchema(b.Ctx, b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	return string(dump)
}

// checkSchemaFile fails unless got is schema.sql, showing where
// they differ first.
func checkSchemaFile(t *testing.T, what, got string) {
	t.Helper()
	want, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if got == string(want) {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	from := max(i-3, 0)
	t.Errorf("the schema of %s is not %s (run make update-schema if the change is meant): from line %d it has\n%s\nwhere the file has\n%s",
		what, schemaFile, i+1, strings.Join(g[from:min(i+8, len(g))], "\n"), strings.Join(w[from:min(i+8, len(w))], "\n"))
}
