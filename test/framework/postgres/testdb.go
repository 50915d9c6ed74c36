package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDatabaseURL names a server to use instead of starting one.
const EnvDatabaseURL = "TEST_DATABASE_URL"

var shared struct {
	once sync.Once
	inst *Instance
	dsn  string
	err  error
}

// sharedServer returns the DSN of the per-test-binary server, starting it on
// first use unless TEST_DATABASE_URL is set.
func sharedServer() (string, error) {
	shared.once.Do(func() {
		if dsn := os.Getenv(EnvDatabaseURL); dsn != "" {
			shared.dsn = dsn
			return
		}
		shared.inst, shared.err = Start(context.Background(), Options{})
		if shared.err == nil {
			shared.dsn = shared.inst.DSN()
		}
	})
	return shared.dsn, shared.err
}

// RunTests runs a test binary's tests and then stops the shared server, if
// one was started. Call it from TestMain: os.Exit(pgtest.RunTests(m)).
// Without it the server still stops when the test binary exits (parent-death
// signal), but its temp dir is left behind.
func RunTests(m *testing.M) int {
	code := m.Run()
	if shared.inst != nil {
		if err := shared.inst.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop test postgres:", err)
		}
	}
	return code
}

// NewTestDatabase creates a fresh, empty database on the shared server and
// returns its DSN; the database is dropped when the test ends.
func NewTestDatabase(t testing.TB) string {
	t.Helper()
	server, err := sharedServer()
	if err != nil {
		t.Fatalf("test postgres: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("connect to test postgres: %v", err)
	}
	defer admin.Close(ctx)

	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name := "test_" + hex.EncodeToString(b)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Errorf("drop test database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(server, name)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// withDatabase points a URL or keyword/value DSN at another database.
func withDatabase(dsn, db string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvDatabaseURL, err)
		}
		u.Path = "/" + db
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " dbname=" + db, nil
}
