package postgres_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// logTables are the view tables and their update log trigger functions
// (migration 024).
var logTables = []string{"cluster_node", "cluster_namespace", "cluster_capacity"}

// TestLogTriggersCompareEveryColumn: each view table's update log trigger
// function compares every column the table has, so a migration that adds
// one must define the function again (registry_define_log_update).
func TestLogTriggersCompareEveryColumn(t *testing.T) {
	t.Parallel()
	_, b := setup(t, postgres.Options{})
	conn := b.Connect(t)
	for _, table := range logTables {
		var src string
		if err := conn.QueryRow(b.Ctx, `SELECT p.prosrc FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid
			WHERE g.tgrelid = $1::regclass AND g.tgname = $1 || '_log_update'`, table).Scan(&src); err != nil {
			t.Fatalf("%s's update log trigger: %v", table, err)
		}
		rows, err := conn.Query(b.Ctx, `SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass
			AND attnum > 0 AND NOT attisdropped AND attname <> 'resource_version'`, table)
		if err != nil {
			t.Fatal(err)
		}
		columns, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range columns {
			if !strings.Contains(src, fmt.Sprintf("(o).%s IS DISTINCT FROM (n).%s", c, c)) {
				t.Errorf("%s's update log trigger does not compare column %s: a migration that adds a column to a view table must call registry_define_log_update again", table, c)
			}
		}
	}
}

// TestUpdateDeltasAreTheChangedColumns: a MODIFIED entry's delta is the old
// value of each column that changed, a NULL as JSON null, as the images
// of the rows before and after give it (registry_change_delta); also for a
// row updated twice in one transaction, whose entry moves to its new
// version.
func TestUpdateDeltasAreTheChangedColumns(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "a",
		Nodes:      []store.Node{node("n1", 4000, 8<<30), node("n2", 2000, 4<<30)},
		Namespaces: []store.Namespace{namespace("x"), namespace("y")},
		Pods:       []store.Pod{pod("x", "p1", "n1", 500, 1<<30)}})
	conn, err := pgx.Connect(ctx, b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, table := range logTables {
		for _, updates := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s updated %d times", table, updates), func(t *testing.T) {
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback(ctx) }()
				if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TEMP TABLE snap ON COMMIT DROP AS
					SELECT cluster_id, name, resource_version, to_jsonb(l) AS obj FROM %s l`, table)); err != nil {
					t.Fatal(err)
				}
				// labels change on every row; usage_observed_at goes from
				// NULL to a time and back, and only on the first row.
				for range updates {
					if _, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s SET resource_version = registry_next_rv(),
						labels = labels || jsonb_build_object('delta-test', resource_version::text),
						usage_observed_at = CASE WHEN name = (SELECT min(name) FROM %s) AND usage_observed_at IS NULL THEN now() END`,
						table, table)); err != nil {
						t.Fatal(err)
					}
				}
				var entries, wrong int
				if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE c.type <> 'MODIFIED' OR c.prev_rv <> s.resource_version
						OR c.prev_delta IS DISTINCT FROM registry_change_delta(s.obj, to_jsonb(l)))
					FROM %s l JOIN snap s USING (cluster_id, name) JOIN registry_change c ON c.resource_version = l.resource_version`, table)).
					Scan(&entries, &wrong); err != nil {
					t.Fatal(err)
				}
				if entries == 0 || wrong != 0 {
					t.Errorf("%d of %d entries have a delta other than the columns that changed", wrong, entries)
				}
				var nulls int
				if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s l JOIN registry_change c ON c.resource_version = l.resource_version
					WHERE c.prev_delta -> 'usage_observed_at' = 'null'`, table)).Scan(&nulls); err != nil {
					t.Fatal(err)
				}
				// Set and cleared again in one transaction, it did not change.
				if want := map[int]int{1: 1, 2: 0}[updates]; nulls != want {
					t.Errorf("%d deltas keep usage_observed_at's NULL, want %d", nulls, want)
				}
			})
		}
	}
}

// TestCapacitySumsKeepTheirPlans: the ClusterCapacity sum functions, which
// every statement writing node or namespace rows runs, are PL/pgSQL with a
// generic plan (migration 025), so a connection plans them once; a
// migration that defines one again as a SQL function would have every
// such statement plan it anew.
func TestCapacitySumsKeepTheirPlans(t *testing.T) {
	t.Parallel()
	_, b := setup(t, postgres.Options{})
	conn := b.Connect(t)
	for _, fn := range []string{"cluster_capacity_add_nodes", "cluster_capacity_add_namespaces"} {
		var lang string
		var config []string
		if err := conn.QueryRow(b.Ctx, `SELECT l.lanname, coalesce(p.proconfig, '{}') FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
			WHERE p.oid = $1::regproc`, fn).Scan(&lang, &config); err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		if lang != "plpgsql" || !slices.Contains(config, "plan_cache_mode=force_generic_plan") {
			t.Errorf("%s is %s with settings %v, want plpgsql with plan_cache_mode=force_generic_plan (migration 025)", fn, lang, config)
		}
	}
}
