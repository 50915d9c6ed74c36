package postgres_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// tlsDSN is a verify-full (or verify-ca) DSN for inst with sslrootcert=ca
// and host.
func tlsDSN(inst *pgtest.Instance, host, mode, ca string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: host + ":" + strconv.Itoa(inst.Port()), Path: "/postgres",
		RawQuery: url.Values{"sslmode": {mode}, "sslrootcert": {ca}}.Encode()}
	return u.String()
}

// TestTLS: sslmode=verify-full with the instance's CA connects over TLS (by
// IP and by name), a wrong CA and a certificate for another host fail,
// connections without TLS still work, and a standby serves TLS too.
func TestTLS(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := pgtest.NewInstance(t, pgtest.Options{})
	if inst.CAFile() != "" {
		t.Errorf("CAFile before EnableTLS = %q, want empty", inst.CAFile())
	}
	if err := inst.EnableTLS(ctx, pgtest.TLSOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(inst.TLSDSN(), "sslmode=verify-full") || inst.CAFile() == "" {
		t.Fatalf("TLSDSN %s, CAFile %q", inst.TLSDSN(), inst.CAFile())
	}
	for _, dsn := range []string{inst.TLSDSN(), tlsDSN(inst, "localhost", "verify-full", inst.CAFile())} {
		conn := connect(t, dsn)
		if count(t, conn, `SELECT ssl::int FROM pg_stat_ssl WHERE pid = pg_backend_pid()`) != 1 {
			t.Errorf("%s: connected without TLS", dsn)
		}
	}
	if count(t, connect(t, inst.DSN()), `SELECT ssl::int FROM pg_stat_ssl WHERE pid = pg_backend_pid()`) != 0 {
		t.Error("DSN (sslmode=disable) connected with TLS")
	}

	wrongCA, err := pgtest.WriteTestCA(t.TempDir(), "other-ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	_, err = pgx.Connect(ctx, tlsDSN(inst, "127.0.0.1", "verify-full", wrongCA))
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); !ok {
		t.Errorf("verify-full with a wrong CA: %v, want x509.UnknownAuthorityError", err)
	}

	// A certificate for another name: verify-full fails, verify-ca (CA only) works.
	if err := inst.EnableTLS(ctx, pgtest.TLSOptions{Hosts: []string{"db.example.test"}}); err != nil {
		t.Fatal(err)
	}
	_, err = pgx.Connect(ctx, inst.TLSDSN())
	if _, ok := errors.AsType[x509.HostnameError](err); !ok {
		t.Errorf("verify-full with a certificate for another host: %v, want x509.HostnameError", err)
	}
	conn, err := pgx.Connect(ctx, tlsDSN(inst, "127.0.0.1", "verify-ca", inst.CAFile()))
	if err != nil {
		t.Fatalf("verify-ca with the right CA: %v", err)
	}
	_ = conn.Close(context.Background())

	// Back to a certificate for 127.0.0.1; a standby serves TLS with it.
	if err := inst.EnableTLS(ctx, pgtest.TLSOptions{}); err != nil {
		t.Fatal(err)
	}
	standby := pgtest.NewStandby(t, inst, pgtest.StandbyOptions{})
	if standby.CAFile() == "" || standby.CAFile() == inst.CAFile() {
		t.Errorf("standby CAFile %q: want its own copy", standby.CAFile())
	}
	if count(t, connect(t, standby.TLSDSN()), `SELECT ssl::int FROM pg_stat_ssl WHERE pid = pg_backend_pid()`) != 1 {
		t.Error("standby: connected without TLS")
	}
}

// TestAddHBARule: a password rule ahead of initdb's trust rules makes the
// server check the role's password over TCP.
func TestAddHBARule(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := pgtest.NewInstance(t, pgtest.Options{})
	exec(t, connect(t, inst.DSN()), `CREATE ROLE app LOGIN PASSWORD 'right'`)
	if err := inst.AddHBARule(ctx, "host all app 127.0.0.1/32 scram-sha-256"); err != nil {
		t.Fatal(err)
	}
	dsn := func(password string) string {
		return "host=127.0.0.1 port=" + strconv.Itoa(inst.Port()) + " user=app password=" + password + " dbname=postgres sslmode=disable"
	}
	if _, err := pgx.Connect(ctx, dsn("wrong")); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("wrong password: %v, want password authentication failed", err)
	}
	connect(t, dsn("right"))
	connect(t, inst.DSN()) // the trust rule still serves postgres
}
