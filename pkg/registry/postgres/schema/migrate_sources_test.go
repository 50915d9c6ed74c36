package schema

import (
	"context"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestMigrateAppliesOnlyTheSourcesThatChanged: Migrate applies a function
// source again when its file changed or its function (or a trigger that
// runs it) is no longer what applying it left, and no other; forgets a source this binary does not
// have; and leaves the sources alone when the database has a migration
// this binary does not know.
func TestMigrateAppliesOnlyTheSourcesThatChanged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewTestDatabase(t)
	mconn := migrationConn(t, dsn)
	if err := Migrate(ctx, mconn); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	embedded := sourceFiles(t)
	all := slices.Sorted(maps.Keys(embedded))

	// migrate runs Migrate with files and returns the sources it applied.
	long := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	migrate := func(step string, files map[string]string) []string {
		t.Helper()
		if _, err := conn.Exec(ctx, `UPDATE registry_schema_sources SET applied_at = $1`, long); err != nil {
			t.Fatal(err)
		}
		mfs := fstest.MapFS{}
		for name, sql := range files {
			mfs[path.Join(functionsDir, name+".sql")] = &fstest.MapFile{Data: []byte(sql)}
		}
		if err := migrateUp(ctx, mconn, -1, mfs); err != nil {
			t.Fatalf("%s: Migrate: %v", step, err)
		}
		rows, err := conn.Query(ctx, `SELECT name FROM registry_schema_sources WHERE applied_at <> $1 ORDER BY name`, long)
		if err != nil {
			t.Fatal(err)
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return applied
	}
	source := func(fn string) string {
		t.Helper()
		var src string
		if err := conn.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE oid = $1::regproc`, fn).Scan(&src); err != nil {
			t.Fatal(err)
		}
		return src
	}
	recorded := func() []string {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT name FROM registry_schema_sources ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}

	if got := recorded(); !slices.Equal(got, all) {
		t.Fatalf("after Migrate the sources recorded are %v, want every file: %v", got, all)
	}
	if got := migrate("nothing changed", embedded); len(got) != 0 {
		t.Errorf("nothing changed: applied %v, want none", got)
	}

	changed := maps.Clone(embedded)
	changed["registry_notify"] = strings.Replace(embedded["registry_notify"], "    RETURN NULL;", "    -- a changed body\n    RETURN NULL;", 1)
	if got := migrate("one file changed", changed); !slices.Equal(got, []string{"registry_notify"}) {
		t.Errorf("one file changed: applied %v, want registry_notify", got)
	}
	if !strings.Contains(source("registry_notify"), "a changed body") {
		t.Errorf("registry_notify is not its changed file's: %s", source("registry_notify"))
	}
	if got := migrate("the same files again", changed); len(got) != 0 {
		t.Errorf("the same files again: applied %v, want none", got)
	}

	// A binary older than the database's newest migration leaves them.
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (999, '999_from_the_future')`); err != nil {
		t.Fatal(err)
	}
	if got := migrate("a newer binary migrated", embedded); len(got) != 0 || !strings.Contains(source("registry_notify"), "a changed body") {
		t.Errorf("a newer binary migrated: applied %v, registry_notify %s; want none applied", got, source("registry_notify"))
	}
	if _, err := conn.Exec(ctx, `DELETE FROM schema_migrations WHERE version = 999`); err != nil {
		t.Fatal(err)
	}

	// A function replaced behind the migrator's back, one dropped (a
	// migration may drop one to change its signature), a trigger dropped
	// (with its table, say, by a down migration), and registry_notify back
	// to its embedded file.
	if _, err := conn.Exec(ctx, `CREATE OR REPLACE FUNCTION cluster_capacity_room(free_cpu numeric, free_memory numeric) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
		DROP FUNCTION usage_bucket(bigint);
		DROP TRIGGER cluster_namespace_sum_delete ON cluster_namespace`); err != nil {
		t.Fatal(err)
	}
	want := []string{"cluster_capacity_namespace_delete", "cluster_capacity_room", "registry_notify", "usage_bucket"}
	if got := migrate("functions changed in the database", embedded); !slices.Equal(got, want) {
		t.Errorf("functions changed in the database: applied %v, want %v", got, want)
	}
	if src := source("cluster_capacity_room"); strings.Contains(src, "true") || strings.Contains(source("registry_notify"), "a changed body") {
		t.Errorf("not back to their files: cluster_capacity_room %q, registry_notify %q", src, source("registry_notify"))
	}
	var triggers int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgname = 'cluster_namespace_sum_delete'`).Scan(&triggers); err != nil || triggers != 1 {
		t.Errorf("cluster_namespace_sum_delete: %d triggers, %v; want it defined again", triggers, err)
	}

	// A file this binary no longer has is forgotten.
	fewer := maps.Clone(embedded)
	delete(fewer, "usage_bucket")
	migrate("a file removed", fewer)
	if got := recorded(); slices.Contains(got, "usage_bucket") || len(got) != len(all)-1 {
		t.Errorf("a file removed: recorded %v, want all but usage_bucket", got)
	}
	if got := migrate("the file back", embedded); !slices.Equal(got, []string{"usage_bucket"}) {
		t.Errorf("the file back: applied %v, want usage_bucket", got)
	}

	// A file must define the function it is named after.
	misnamed := maps.Clone(embedded)
	misnamed["no_such_function"] = embedded["cluster_node_tainted"]
	mfs := fstest.MapFS{}
	for name, sql := range misnamed {
		mfs[path.Join(functionsDir, name+".sql")] = &fstest.MapFile{Data: []byte(sql)}
	}
	if err := migrateUp(ctx, mconn, -1, mfs); err == nil || !strings.Contains(err.Error(), "no_such_function.sql defines no function no_such_function") {
		t.Errorf("a misnamed file: Migrate = %v, want an error naming it", err)
	}
}

// TestMigrateRunsAgainAfterADeadlock: applying the sources re-creates
// triggers, which locks their tables; a writer that holds one of them and
// then waits for one the migrator took (registry_state's, as a publish
// does) deadlocks with it, PostgreSQL ends the migrator's transaction (it
// waited first), and Migrate runs it again.
func TestMigrateRunsAgainAfterADeadlock(t *testing.T) {
	t.Parallel()
	var logs pgtesting.SyncBuffer
	ctx := klog.NewContext(t.Context(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&logs))))
	dsn := pgtest.NewTestDatabase(t)
	mconn := migrationConn(t, dsn)
	if err := Migrate(ctx, mconn); err != nil {
		t.Fatal(err)
	}
	conns := make([]*pgx.Conn, 2)
	for i := range conns {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		conns[i] = c
	}
	writer, watcher := conns[0], conns[1]
	// PostgreSQL checks a wait for a deadlock once, deadlock_timeout after
	// it began. The migrator, waiting first, must be the one to find it: its
	// check comes 5 s after its wait began (time for the writer's statement
	// on a loaded machine, where 1 s was not always), the writer's after a
	// minute.
	if _, err := mconn.Exec(ctx, `SET deadlock_timeout = '5s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Exec(ctx, `SET deadlock_timeout = '1min'`); err != nil {
		t.Fatal(err)
	}
	// Every source to apply again, the triggers of registry_state before
	// those of cluster_capacity (file name order).
	if _, err := writer.Exec(ctx, `DELETE FROM registry_schema_sources`); err != nil {
		t.Fatal(err)
	}
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `UPDATE cluster_capacity SET labels = labels WHERE false`); err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	go func() { migrated <- Migrate(ctx, mconn) }()
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var waiting bool
		err := watcher.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = 'cluster_capacity'::regclass AND NOT granted)`).Scan(&waiting)
		return waiting, err
	}); err != nil {
		t.Fatalf("the migrator never waited for cluster_capacity: %v", err)
	}
	// Granted once PostgreSQL ended the migrator's first attempt.
	if _, err := tx.Exec(ctx, `UPDATE registry_state SET write_protocol = write_protocol`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("Migrate after a deadlock: %v", err)
	}
	if !strings.Contains(logs.String(), "Registry migration ended by a deadlock; running it again") {
		t.Errorf("Migrate did not run its transaction again after a deadlock; its log:\n%s", logs.String())
	}
	var recorded int
	if err := watcher.QueryRow(ctx, `SELECT count(*) FROM registry_schema_sources`).Scan(&recorded); err != nil || recorded != len(sourceFiles(t)) {
		t.Errorf("%d sources recorded, %v; want every one", recorded, err)
	}
}

// TestEveryFunctionHasItsSource: each function of a migrated registry is
// defined by the file of its name in schema/functions, but the update log
// functions registry_define_log_update makes, each what its template makes
// now; each aggregate and trigger is defined in the file of the function
// it runs, but a view table's log triggers, which registry_define_view
// makes; each file's bodies pass PostgreSQL's check.
func TestEveryFunctionHasItsSource(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := migrationConn(t, pgtest.NewTestDatabase(t))
	if err := Migrate(ctx, conn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	files := sourceFiles(t)

	// The view tables, whose update log function the template makes: those
	// whose inserts registry_log_insert logs, as the kind their trigger says.
	generated := map[string]string{}
	rows, err := conn.Query(ctx, `SELECT 'registry_log_update_' || g.tgrelid::regclass::text, convert_from(substring(g.tgargs FOR position('\x00'::bytea IN g.tgargs) - 1), 'UTF8')
		FROM pg_trigger g WHERE g.tgfoid = 'registry_log_insert'::regproc`)
	if err != nil {
		t.Fatal(err)
	}
	var name, kind string
	if _, err := pgx.ForEachRow(rows, []any{&name, &kind}, func() error {
		generated[name] = kind
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(generated) < 3 {
		t.Errorf("view tables %v, want the three views' at least", generated)
	}
	rows, err = conn.Query(ctx, `SELECT p.proname, p.prokind::text, coalesce(a.aggtransfn::regproc::text, '') FROM pg_proc p
		LEFT JOIN pg_aggregate a ON a.aggfnoid = p.oid WHERE p.pronamespace = current_schema()::regnamespace ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var (
		step      string
		functions int
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &kind, &step}, func() error {
		_, ok := files[name]
		switch {
		case kind == "a":
			if !strings.Contains(files[step], "CREATE OR REPLACE AGGREGATE "+name+"(") {
				t.Errorf("aggregate %s is not defined in %s.sql, the file of its step function", name, step)
			}
		case generated[name] != "":
			functions++
		case !ok:
			t.Errorf("function %s has no file %s/%s.sql", name, functionsDir, name)
		default:
			functions++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := len(files) + len(generated); functions != want {
		t.Errorf("%d functions, want %d: one per file and %d made by registry_define_log_update", functions, want, len(generated))
	}

	rows, err = conn.Query(ctx, `SELECT g.tgname, g.tgrelid::regclass::text, p.proname FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid
		WHERE NOT g.tgisinternal ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var trigger, table string
	if _, err := pgx.ForEachRow(rows, []any{&trigger, &table, &name}, func() error {
		switch {
		case generated[name] != "":
			if trigger != table+"_log_update" || name != "registry_log_update_"+table {
				t.Errorf("trigger %s on %s runs %s, want %s_log_update running registry_log_update_%s", trigger, table, name, table, table)
			}
		case generated["registry_log_update_"+table] != "" && (name == "registry_log_insert" || name == "registry_log_delete") &&
			trigger == table+strings.TrimPrefix(name, "registry"):
			// A view table's, made by registry_define_view.
		case !strings.Contains(files[name], "CREATE OR REPLACE TRIGGER "+trigger+" "):
			t.Errorf("trigger %s is not defined in %s.sql, the file of the function it runs", trigger, name)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Migrate creates functions without checking their bodies (a file may
	// call a later one's function); with every function in place, each file
	// passes the check.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if _, err := tx.Exec(ctx, files[name]); err != nil {
			t.Fatalf("%s/%s.sql with its body checked: %v", functionsDir, name, err)
		}
	}

	// Made anew from the template, each update log function is unchanged.
	for fn, kind := range generated {
		table := strings.TrimPrefix(fn, "registry_log_update_")
		var before, after string
		if err := tx.QueryRow(ctx, `SELECT pg_get_functiondef($1::regproc)`, fn).Scan(&before); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT registry_define_log_update($1::regclass, $2)`, table, kind); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRow(ctx, `SELECT pg_get_functiondef($1::regproc)`, fn).Scan(&after); err != nil {
			t.Fatal(err)
		}
		if before != after {
			t.Errorf("%s is not what registry_define_log_update makes now: a migration changed %s without calling it", fn, table)
		}
	}
}

// TestMigrationsLeaveFunctionsToSources: no migration after
// lastMigrationWithFunctions defines a function, aggregate or trigger
// (their down files may restore an older body), and none rewrites a
// function's text.
func TestMigrationsLeaveFunctionsToSources(t *testing.T) {
	t.Parallel()
	all, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	defines := regexp.MustCompile(`(?i)\bCREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE|AGGREGATE|(CONSTRAINT\s+)?TRIGGER)\b`)
	rewrites := regexp.MustCompile(`(?i)\b(pg_get_functiondef|prosrc)\b`)
	for _, m := range all {
		if m.Version > lastMigrationWithFunctions && defines.MatchString(m.Up) {
			t.Errorf("migration %s defines %q: functions and their triggers belong in %s (docs/registry.md, \"Where the schema lives\")",
				m.Name, defines.FindString(m.Up), functionsDir)
		}
		for dir, sql := range map[string]string{"up": m.Up, "down": m.Down} {
			if rewrites.MatchString(sql) {
				t.Errorf("migration %s.%s.sql reads a function's text (%s): state the body instead", m.Name, dir, rewrites.FindString(sql))
			}
		}
	}
}

// sourceFiles reads the embedded function sources, by name.
func sourceFiles(t *testing.T) map[string]string {
	t.Helper()
	sources, err := functionSources(functionFiles)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, src := range sources {
		out[src.Name] = src.SQL
	}
	if len(out) == 0 {
		t.Fatalf("no files in %s", functionsDir)
	}
	return out
}
