package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

func TestMain(m *testing.M) {
	os.Exit(pgtest.RunTests(m))
}

// testDBInsecure: the test databases listen on loopback without TLS
// (sslmode=disable).
const testDBInsecure = "--postgres-allow-insecure"

// runCommand runs platform-apiserver with args and returns its output.
func runCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand(t.Context())
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestMigrateStatus checks `migrate status` on a fresh database (every
// migration pending), after `migrate` (every one applied, with a time), and
// with a migration in the database that this binary does not know.
func TestMigrateStatus(t *testing.T) {
	dsn := pgtest.NewTestDatabase(t)
	out, err := runCommand(t, "migrate", "status", "--postgres-dsn="+dsn, testDBInsecure)
	if err != nil {
		t.Fatalf("migrate status: %v\n%s", err, out)
	}
	pending := regexp.MustCompile(`(?m)^\d+\s+\d{3}_\w+\s+pending\s*$`).FindAllString(out, -1)
	if len(pending) < 6 || !strings.Contains(out, "0 applied, "+strconv.Itoa(len(pending))+" pending") {
		t.Fatalf("fresh database: want every migration pending, got:\n%s", out)
	}
	if !strings.Contains(out, "001_registry") {
		t.Errorf("status lacks 001_registry:\n%s", out)
	}

	// The DSN from a file, as the manifests mount it from a Secret.
	dsnFile := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(dsnFile, []byte(dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runCommand(t, "migrate", "--postgres-dsn-file="+dsnFile, testDBInsecure); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	out, err = runCommand(t, "migrate", "status", "--postgres-dsn-file="+dsnFile, testDBInsecure)
	if err != nil {
		t.Fatalf("migrate status: %v\n%s", err, out)
	}
	applied := regexp.MustCompile(`(?m)^\d+\s+\d{3}_\w+\s+applied\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`).FindAllString(out, -1)
	if len(applied) != len(pending) || !strings.Contains(out, strconv.Itoa(len(pending))+" applied, 0 pending") {
		t.Fatalf("after migrate: want the %d migrations applied with a time, got:\n%s", len(pending), out)
	}

	// A newer binary's migration: listed, flagged, counted.
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `INSERT INTO schema_migrations (version, name) VALUES (999, '999_from_the_future')`); err != nil {
		t.Fatal(err)
	}
	out, err = runCommand(t, "migrate", "status", "--postgres-dsn="+dsn, testDBInsecure)
	if err != nil {
		t.Fatalf("migrate status: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^999\s+999_from_the_future\s+applied \(unknown to this binary`).MatchString(out) ||
		!strings.Contains(out, "1 unknown to this binary") {
		t.Errorf("status does not flag the unknown migration:\n%s", out)
	}
}

// TestMigrateDown: `migrate down --to N` reverts the migrations newer than
// N (status lists them pending again), and refuses to run without --to.
func TestMigrateDown(t *testing.T) {
	dsn := pgtest.NewTestDatabase(t)
	if out, err := runCommand(t, "migrate", "--postgres-dsn="+dsn, testDBInsecure); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	if out, err := runCommand(t, "migrate", "down", "--postgres-dsn="+dsn, testDBInsecure); err == nil || !strings.Contains(err.Error(), "--to is required") {
		t.Errorf("down without --to: %v, want refused naming --to\n%s", err, out)
	}
	if out, err := runCommand(t, "migrate", "down", "--to=25", "--postgres-dsn="+dsn, testDBInsecure); err != nil {
		t.Fatalf("migrate down --to=25: %v\n%s", err, out)
	}
	out, err := runCommand(t, "migrate", "status", "--postgres-dsn="+dsn, testDBInsecure)
	if err != nil {
		t.Fatalf("migrate status: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^25\s+025_\w+\s+applied`).MatchString(out) || !regexp.MustCompile(`(?m)^26\s+026_\w+\s+pending`).MatchString(out) {
		t.Errorf("after down --to=25: want 025 applied and 026 pending:\n%s", out)
	}
	if out, err := runCommand(t, "migrate", "--postgres-dsn="+dsn, testDBInsecure); err != nil {
		t.Fatalf("migrate again: %v\n%s", err, out)
	}
}

func TestMigrateStatusBadFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"dsn and dsn file": {"migrate", "status", "--postgres-dsn=postgres://h/db", "--postgres-dsn-file=/nonexistent"},
		"missing dsn file": {"migrate", "status", "--postgres-dsn-file=/nonexistent/dsn"},
	} {
		t.Run(name, func(t *testing.T) {
			if out, err := runCommand(t, args...); err == nil || !strings.Contains(err.Error(), "--postgres-dsn") {
				t.Errorf("%v: err %v, want one naming --postgres-dsn(-file); output:\n%s", args, err, out)
			}
		})
	}
}
