package schema

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// viewTables are the registry's view tables and their kinds.
var viewTables = map[string]string{"cluster_node": "NodeCapacity", "cluster_namespace": "ClusterNamespace", "cluster_capacity": "ClusterCapacity"}

// TestDefineView: registry_define_view makes a view table's change log
// triggers exactly as the view tables have them, and adds its kind to the
// change log's list without checking the log's rows; a view table defined
// again, or a kind listed already, changes nothing.
func TestDefineView(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := migrationConn(t, pgtest.NewTestDatabase(t))
	if err := Migrate(ctx, conn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	before := changeLogDefinitions(t, conn)
	for table, kind := range viewTables {
		if _, err := conn.Exec(ctx, `SELECT registry_define_view($1, $2)`, table, kind); err != nil {
			t.Fatalf("registry_define_view(%s, %s): %v", table, kind, err)
		}
	}
	if after := changeLogDefinitions(t, conn); !maps.Equal(before, after) {
		t.Errorf("registry_define_view of the view tables changed their change log:\nbefore %v\nafter  %v", before, after)
	}

	if _, err := conn.Exec(ctx, `CREATE TABLE test_thing (cluster_id text NOT NULL, name text NOT NULL,
		size bigint NOT NULL, resource_version bigint NOT NULL, PRIMARY KEY (cluster_id, name))`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := conn.Exec(ctx, `SELECT registry_define_view('test_thing', 'Thing')`); err != nil {
			t.Fatalf("registry_define_view(test_thing, Thing): %v", err)
		}
	}
	got := changeLogDefinitions(t, conn)
	for _, event := range []string{"insert", "delete"} {
		want := strings.NewReplacer("cluster_node", "test_thing", "NodeCapacity", "Thing").Replace(before["cluster_node_log_"+event])
		if got["test_thing_log_"+event] != want {
			t.Errorf("test_thing_log_%s: %s, want %s", event, got["test_thing_log_"+event], want)
		}
	}
	if got["test_thing_log_update"] == "" {
		t.Error("test_thing has no update log trigger")
	}
	var check string
	var valid bool
	if err := conn.QueryRow(ctx, `SELECT pg_get_constraintdef(oid), convalidated FROM pg_constraint
		WHERE conrelid = 'registry_change'::regclass AND conname = 'registry_change_kind_check'`).Scan(&check, &valid); err != nil {
		t.Fatal(err)
	}
	if want := `CHECK ((kind = ANY (ARRAY['NodeCapacity'::text, 'ClusterNamespace'::text, 'ClusterCapacity'::text, 'Thing'::text]))) NOT VALID`; check != want || valid {
		t.Errorf("the change log's kinds: %s (validated %t), want %s, not validated (the log's rows are not scanned)", check, valid, want)
	}

	if _, err := conn.Exec(ctx, `SELECT registry_define_view('test_thing', 'Thing''s')`); err == nil || !strings.Contains(err.Error(), "an API kind name") {
		t.Errorf("registry_define_view of a kind that is no kind name: %v, want an error", err)
	}
}

// changeLogDefinitions are the change log's triggers on every table, by
// name, with the update functions they run, and its list of kinds.
func changeLogDefinitions(t *testing.T, conn *pgxpool.Conn) map[string]string {
	t.Helper()
	rows, err := conn.Query(t.Context(), `
		SELECT g.tgname::text, pg_get_triggerdef(g.oid) || CASE WHEN g.tgname LIKE '%\_log\_update' THEN E'\n' || pg_get_functiondef(g.tgfoid) ELSE '' END
		FROM pg_trigger g WHERE NOT g.tgisinternal AND g.tgname LIKE '%\_log\_%'
		UNION ALL
		SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'registry_change'::regclass AND conname = 'registry_change_kind_check'`)
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]string{}
	var name, def string
	if _, err := pgx.ForEachRow(rows, []any{&name, &def}, func() error {
		defs[name] = def
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(defs) < 3*len(viewTables)+1 {
		t.Fatalf("change log definitions: %v, want three triggers per view table and the list of kinds", defs)
	}
	return defs
}

// TestMigrationCallsDefineView: a migration after 028 that adds a view
// table calls registry_define_view, which a registry migrated from empty
// has by then (its file is marked called-by-migrations); the next Migrate
// applies nothing.
func TestMigrationCallsDefineView(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := migrationConn(t, pgtest.NewTestDatabase(t))
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	next := all[len(all)-1].Version + 1
	all = append(all, migration{Version: next, Name: strconv.Itoa(next) + "_test_gadget",
		Up: `CREATE TABLE test_gadget (cluster_id text NOT NULL, name text NOT NULL, color text NOT NULL,
			resource_version bigint NOT NULL, PRIMARY KEY (cluster_id, name));
			SELECT registry_define_view('test_gadget', 'Gadget');`,
		Down: `DROP TABLE test_gadget;`})
	if err := migrateUpWith(ctx, conn, all, -1, functionFiles); err != nil {
		t.Fatalf("Migrate from empty with a migration that calls registry_define_view: %v", err)
	}
	defs := changeLogDefinitions(t, conn)
	for _, trigger := range []string{"test_gadget_log_insert", "test_gadget_log_update", "test_gadget_log_delete"} {
		if defs[trigger] == "" {
			t.Errorf("no trigger %s", trigger)
		}
	}
	if !strings.Contains(defs["test_gadget_log_update"], "(o).color IS DISTINCT FROM (n).color") || !strings.Contains(defs["registry_change_kind_check"], "'Gadget'") {
		t.Errorf("test_gadget's update log function or the change log's kinds lack it:\n%s\n%s", defs["test_gadget_log_update"], defs["registry_change_kind_check"])
	}

	var before time.Time
	if err := conn.QueryRow(ctx, `SELECT max(applied_at) FROM registry_schema_sources`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if err := migrateUpWith(ctx, conn, all, -1, functionFiles); err != nil {
		t.Fatal(err)
	}
	var applied []string
	rows, err := conn.Query(ctx, `SELECT name FROM registry_schema_sources WHERE applied_at > $1 ORDER BY name`, before)
	if err == nil {
		applied, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(applied) != 0 {
		t.Errorf("Migrate again applied %v, %v; want nothing", applied, err)
	}
}

// TestExtensionMigrations: an extension's migrations are ordered with the
// registry's own by version; one that takes a registry migration's version
// or name is refused, naming it.
func TestExtensionMigrations(t *testing.T) {
	file := func(name string) *fstest.MapFile { return &fstest.MapFile{Data: []byte("SELECT 1; -- " + name)} }
	ext := fstest.MapFS{"9001_gadget.up.sql": file("up"), "9001_gadget.down.sql": file("down")}
	all, err := migrations(ext)
	if err != nil {
		t.Fatal(err)
	}
	own, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if last := all[len(all)-1]; len(all) != len(own)+1 || last.Name != "9001_gadget" || last.Version != 9001 || last.Down != "SELECT 1; -- down" {
		t.Errorf("with the extension: %d migrations ending in %+v, want the registry's %d then 9001_gadget", len(all), last, len(own))
	}
	for _, tc := range []struct {
		ext  fstest.MapFS
		want string
	}{
		{fstest.MapFS{"001_other.up.sql": file("up"), "001_other.down.sql": file("down")}, "share a version"},
		{fstest.MapFS{own[0].Name + ".up.sql": file("up"), own[0].Name + ".down.sql": file("down")}, "is the registry's and an extension's"},
		{fstest.MapFS{"9002_half.up.sql": file("up")}, "9002_half lacks its up or down file"},
		{fstest.MapFS{"gadget.up.sql": file("up")}, "want a numeric prefix"},
	} {
		if _, err := migrations(tc.ext); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("migrations(%v): %v, want an error saying %q", slices.Collect(maps.Keys(tc.ext)), err, tc.want)
		}
	}
}
