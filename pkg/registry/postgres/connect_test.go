package postgres

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// statementTimeoutParam is the setting the store gives a default
// (pgdb.ConfigureConnections).
const statementTimeoutParam = "statement_timeout"

func openStore(t *testing.T, dsn string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dsn, err)
	}
	t.Cleanup(s.Close)
	return s
}

// migratedStore opens a store on a fresh database and migrates it.
func migratedStore(t *testing.T) *Store {
	t.Helper()
	s := openStore(t, pgtest.NewTestDatabase(t), Options{})
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func showSetting(t *testing.T, s *Store, name string) string {
	t.Helper()
	var v string
	if err := s.reads.QueryRow(t.Context(), `SHOW `+name).Scan(&v); err != nil {
		t.Fatalf("SHOW %s: %v", name, err)
	}
	return v
}

// TestStatementTimeout: sessions get a statement timeout unless the DSN
// sets one (as a parameter or in options); a statement past it fails with
// ErrTimeout; migrations lift it, also while they wait for another
// replica's, and give it back.
func TestStatementTimeout(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewTestDatabase(t)
	for _, tc := range []struct{ dsn, want string }{
		{dsn, "1min"},
		{withParam(dsn, statementTimeoutParam, "5s"), "5s"},
		{withParam(dsn, "options", "-c%20statement_timeout%3D7s"), "7s"},
	} {
		if got := showSetting(t, openStore(t, tc.dsn, Options{}), statementTimeoutParam); got != tc.want {
			t.Errorf("DSN %s: statement_timeout = %s, want %s", tc.dsn, got, tc.want)
		}
	}

	s := openStore(t, withParam(dsn, statementTimeoutParam, "200ms"), Options{})
	_, err := s.reads.Exec(t.Context(), `SELECT pg_sleep(2)`)
	if err = pgdb.InterpretError(err); !errors.Is(err, store.ErrTimeout) {
		t.Fatalf("a statement past the timeout: %v, want ErrTimeout", err)
	}

	// Another replica holds the migration lock longer than the timeout.
	other, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if _, err := other.Exec(t.Context(), `SELECT pg_advisory_lock($1)`, schema.MigrationLockKey); err != nil {
		t.Fatal(err)
	}
	released := time.AfterFunc(time.Second, func() {
		_, _ = other.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, schema.MigrationLockKey)
	})
	defer released.Stop()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate behind another replica's migration: %v", err)
	}
	s.reads.Reset() // every later connection: the statement above may have reused the migration's
	if got := showSetting(t, s, statementTimeoutParam); got != "200ms" {
		t.Errorf("after Migrate: statement_timeout = %s, want the DSN's 200ms", got)
	}
}

// TestConnectTimeoutDefault: connect_timeout from the DSN or 10s.
func TestConnectTimeoutDefault(t *testing.T) {
	for dsn, want := range map[string]time.Duration{
		"postgres://u@127.0.0.1:1/db":                   pgdb.DefaultConnectTimeout,
		"postgres://u@127.0.0.1:1/db?connect_timeout=3": 3 * time.Second,
	} {
		s, err := Open(context.Background(), dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.reads.Config().ConnConfig.ConnectTimeout; got != want {
			t.Errorf("%s: ConnectTimeout %s, want %s", dsn, got, want)
		}
		s.Close()
	}
}

// tlsDSN is a URL DSN for database db on inst with sslmode and sslrootcert.
func tlsDSN(inst *pgtest.Instance, host, db, mode, rootCert string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: net.JoinHostPort(host, strconv.Itoa(inst.Port())), Path: "/" + db,
		RawQuery: url.Values{"sslmode": {mode}, "sslrootcert": {rootCert}}.Encode()}
	return u.String()
}

// TestTLSErrors: against a server with its own CA, verify-full with that CA
// works; a wrong CA or a certificate for another host fails readiness with
// a message that says what is wrong and which setting to check, wrapping
// the x509 error; so does each host of a multi-host DSN.
func TestTLSErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := pgtest.NewInstance(t, pgtest.Options{TLS: true})
	if err := inst.CreateDatabase(ctx, "registry"); err != nil {
		t.Fatal(err)
	}
	good := openStore(t, tlsDSN(inst, "127.0.0.1", "registry", "verify-full", inst.CAFile()), Options{})
	if err := good.Migrate(ctx); err != nil {
		t.Fatalf("Migrate over verify-full: %v", err)
	}
	if err := good.Ready(ctx); err != nil {
		t.Fatalf("Ready over verify-full: %v", err)
	}
	var ssl bool
	if err := good.reads.QueryRow(ctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl); err != nil || !ssl {
		t.Fatalf("store connection uses TLS: %v, %v", ssl, err)
	}

	wrongCA, err := pgtest.WriteTestCA(t.TempDir(), "wrong-ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	for _, dsn := range []string{
		tlsDSN(inst, "127.0.0.1", "registry", "verify-full", wrongCA),
		tlsDSN(inst, "localhost", "registry", "verify-ca", wrongCA),
		fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=registry sslmode=verify-full sslrootcert='%s'", inst.Port(), wrongCA),
	} {
		err := openStore(t, dsn, Options{}).Ready(ctx)
		want := "the registry database's TLS certificate (issued by \"CN=pgtest CA\") is not signed by the CA in sslrootcert=" + wrongCA +
			": check --postgres-dsn's sslrootcert (the CA that issued the server's certificate) or sslmode"
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("%s: Ready = %v\nwant ErrUnavailable saying %q", dsn, err, want)
		}
		if _, ok := errors.AsType[x509.UnknownAuthorityError](err); !ok {
			t.Errorf("%s: Ready = %v, want it to wrap x509.UnknownAuthorityError", dsn, err)
		}
	}

	// Both hosts of a multi-host DSN say so.
	multi := fmt.Sprintf("host=127.0.0.1,localhost port=%d,%d user=postgres dbname=registry sslmode=verify-full sslrootcert=%s", inst.Port(), inst.Port(), wrongCA)
	if err := openStore(t, multi, Options{}).Ready(ctx); strings.Count(fmt.Sprint(err), "is not signed by the CA in sslrootcert=") < 2 {
		t.Errorf("multi-host: Ready = %v, want the explanation for each host", err)
	}

	// A certificate for another name.
	if err := inst.EnableTLS(ctx, pgtest.TLSOptions{Hosts: []string{"db.example.test"}}); err != nil {
		t.Fatal(err)
	}
	err = openStore(t, tlsDSN(inst, "127.0.0.1", "registry", "verify-full", inst.CAFile()), Options{}).Ready(ctx)
	want := `the registry database's TLS certificate is not valid for the host "127.0.0.1" the DSN connects to (it is for db.example.test): ` +
		"connect with a host name the certificate lists (--postgres-dsn's host), or set sslmode=verify-ca to check only the CA"
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(fmt.Sprint(err), want) {
		t.Errorf("hostname mismatch: Ready = %v\nwant ErrUnavailable saying %q", err, want)
	}
	if _, ok := errors.AsType[x509.HostnameError](err); !ok {
		t.Errorf("hostname mismatch: Ready = %v, want it to wrap x509.HostnameError", err)
	}
	if err := openStore(t, tlsDSN(inst, "127.0.0.1", "registry", "verify-ca", inst.CAFile()), Options{}).Ready(ctx); err != nil {
		t.Errorf("verify-ca with the right CA and a certificate for another name: %v", err)
	}
}

// serverPort is the port of the server a pool connection reached.
func serverPort(ctx context.Context, s *Store) (port int, inRecovery bool, err error) {
	err = s.reads.QueryRow(ctx, `SELECT inet_server_port(), pg_is_in_recovery()`).Scan(&port, &inRecovery)
	return port, inRecovery, err
}

// TestMultiHost: with a primary and a streaming standby in a multi-host DSN,
// target_session_attrs=read-write reaches the primary whatever the order,
// standby and prefer-standby the standby; and after the primary crashes and
// the standby is promoted, the same store finds the new primary.
func TestMultiHost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary := pgtest.NewInstance(t, pgtest.Options{})
	if err := primary.CreateDatabase(ctx, "registry"); err != nil {
		t.Fatal(err)
	}
	standby := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	for _, tc := range []struct {
		attrs string
		hosts []*pgtest.Instance
		want  *pgtest.Instance
	}{
		{"read-write", []*pgtest.Instance{standby.Instance, primary}, primary},
		{"read-write", []*pgtest.Instance{primary, standby.Instance}, primary},
		{"standby", []*pgtest.Instance{primary, standby.Instance}, standby.Instance},
		{"prefer-standby", []*pgtest.Instance{primary, standby.Instance}, standby.Instance},
	} {
		dsn := pgtest.MultiHostDSN("registry", tc.attrs, tc.hosts...)
		s := openStore(t, dsn, Options{})
		if tc.attrs == "read-write" {
			if err := s.Migrate(ctx); err != nil {
				t.Fatalf("%s: Migrate: %v", dsn, err)
			}
		} else if err := standby.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Ready(ctx); err != nil {
			t.Errorf("%s: Ready: %v", dsn, err)
		}
		if port, _, err := serverPort(ctx, s); err != nil || port != tc.want.Port() {
			t.Errorf("%s: connected to port %d (%v), want %d", dsn, port, err, tc.want.Port())
		}
	}
	// prefer-standby falls back to the primary when no standby answers.
	if port, _, err := serverPort(ctx, openStore(t, pgtest.MultiHostDSN("registry", "prefer-standby", primary), Options{})); err != nil || port != primary.Port() {
		t.Errorf("prefer-standby without a standby: port %d (%v), want the primary's %d", port, err, primary.Port())
	}

	// Failover: the primary crashes, the standby is promoted; the store
	// that listed both reconnects to the new primary.
	s := openStore(t, pgtest.MultiHostDSN("registry", "read-write", primary, standby.Instance), Options{})
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		port, inRecovery, err := serverPort(ctx, s)
		if last = err; err != nil {
			return false, nil
		}
		return port == standby.Port() && !inRecovery, nil
	})
	if err != nil {
		t.Fatalf("store did not reach the promoted standby: %v (last: %v)", err, last)
	}
	if err := s.Ready(ctx); err != nil {
		t.Errorf("Ready after failover: %v", err)
	}
}

// TestDSNFileReload: with Options.DSNFile, a rotated password reaches new
// connections without reopening the store; a file that becomes unparsable
// or disappears keeps the last good credentials and is logged once, without
// the password.
func TestDSNFileReload(t *testing.T) {
	t.Parallel()
	inst := pgtest.NewInstance(t, pgtest.Options{})
	var logs pgtesting.SyncBuffer
	ctx := klog.NewContext(t.Context(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&logs))))
	admin, err := pgx.Connect(ctx, inst.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for _, stmt := range []string{`CREATE ROLE app LOGIN PASSWORD 'first-secret'`, `CREATE DATABASE registry OWNER app`} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := inst.AddHBARule(ctx, "host all app 127.0.0.1/32 scram-sha-256"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dsn")
	dsn := func(password string) string {
		return fmt.Sprintf("host=127.0.0.1 port=%d user=app password=%s dbname=registry sslmode=disable", inst.Port(), password)
	}
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file+".tmp", []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".tmp", file); err != nil { // as the kubelet updates a Secret: atomically
			t.Fatal(err)
		}
	}
	// dropConnections ends the store's sessions, so its next query connects
	// anew: the pool pings a connection idle for more than a second before
	// handing it out and replaces it if the ping fails (one idle for less is
	// used as it is, and its first statement fails).
	dropConnections := func() {
		t.Helper()
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'app'`); err != nil {
			t.Fatal(err)
		}
		_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			var n int
			err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'`).Scan(&n)
			return err == nil && n == 0, nil
		})
		time.Sleep(1100 * time.Millisecond) // time passing on purpose: the pool's idle check pings
	}

	write(dsn("first-secret"))
	s := openStore(t, dsn("first-secret"), Options{DSNFile: file})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}

	// The password changes in the database first: new sessions fail until
	// the file has it too.
	if _, err := admin.Exec(ctx, `ALTER ROLE app PASSWORD 'second-secret'`); err != nil {
		t.Fatal(err)
	}
	dropConnections()
	if err := s.Ready(ctx); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("Ready with the old password in the file: %v, want password authentication failed", err)
	}
	write(dsn("second-secret"))
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready after the file got the new password: %v", err)
	}
	if !strings.Contains(logs.String(), "Registry DSN file changed; new connections use its credentials") {
		t.Errorf("no log of the change:\n%s", logs.String())
	}
	if cc, err := s.feed.ConnConfig(ctx); err != nil || cc.Password != "second-secret" {
		t.Errorf("connConfig: password %q, %v; want the file's", cc.Password, err)
	}

	// An unparsable file, then none: the last good credentials stay.
	write("user=app password=leaked-secret dbname=registry this-is-not-a-setting")
	for range 2 {
		dropConnections()
		if err := s.Ready(ctx); err != nil {
			t.Fatalf("Ready with an unparsable DSN file: %v", err)
		}
	}
	if n := strings.Count(logs.String(), "Cannot parse the registry DSN file"); n != 1 {
		t.Errorf("the unparsable file was logged %d times, want once:\n%s", n, logs.String())
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	dropConnections()
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready without the DSN file: %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, "Cannot read the registry DSN file") || !strings.Contains(out, `file="`+file+`"`) {
		t.Errorf("the missing file was not logged with its name:\n%s", out)
	}
	if strings.Contains(out, "secret") {
		t.Errorf("a password reached the log:\n%s", out)
	}
}

// TestReconnect: when the server goes away the store fails fast with
// ErrUnavailable; when it comes back the same store serves again (the pool
// drops its dead connections and dials anew on the next acquire).
func TestReconnect(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := pgtest.NewInstance(t, pgtest.Options{})
	s := openStore(t, inst.DSN(), Options{})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := inst.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Ready(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ready with the server down: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Ready took %s to fail with the server down", d)
	}
	if err := inst.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready after the server came back: %v", err)
	}
}

// TestNoReconnectStorm: while the server refuses every session, an idle
// store dials nothing in the background, and the notification listener
// retries with backoff, not in a loop.
func TestNoReconnectStorm(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close() // a server that goes away at once
		}
	}()
	s := openStore(t, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", l.Addr()), Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	notes, err := s.Notifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the window attempts are counted in
	// Backoff from 100ms doubling: about 5 attempts in 3s, a loop thousands.
	if n := accepted.Load(); n > 10 {
		t.Errorf("%d connection attempts in 3s while the server refuses sessions, want a few (backoff)", n)
	}
	cancel()
	for range notes { // closed once the listener has stopped
	}
	before := accepted.Load()
	time.Sleep(2 * time.Second) // the window no attempt may fall in
	if n := accepted.Load() - before; n != 0 {
		t.Errorf("an idle store dialed %d times in 2s", n)
	}
}
