package app

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestMigrateTLS runs `migrate` and `migrate status` against a database
// that serves TLS with its own CA: with sslmode=verify-full and that CA they
// work (also from --postgres-dsn-file); with another CA, or a certificate
// for another host, they fail saying what is wrong and what to check.
func TestMigrateTLS(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := pgtest.NewInstance(t, pgtest.Options{TLS: true})
	if err := inst.CreateDatabase(ctx, "registry"); err != nil {
		t.Fatal(err)
	}
	dsn := func(rootCert string) string {
		u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: "127.0.0.1:" + strconv.Itoa(inst.Port()), Path: "/registry",
			RawQuery: url.Values{"sslmode": {"verify-full"}, "sslrootcert": {rootCert}}.Encode()}
		return u.String()
	}
	wrongCA, err := pgtest.WriteTestCA(t.TempDir(), "wrong-ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	wantWrongCA := "is not signed by the CA in sslrootcert=" + wrongCA + ": check --postgres-dsn's sslrootcert"
	for _, args := range [][]string{
		{"migrate", "status", "--postgres-dsn=" + dsn(wrongCA)},
		{"migrate", "--postgres-dsn=" + dsn(wrongCA)},
	} {
		out, err := runCommand(t, args...)
		t.Logf("%s: %v", args[len(args)-2], err)
		if err == nil || !strings.Contains(err.Error(), wantWrongCA) {
			t.Errorf("%v: err %v\nwant one saying %q; output:\n%s", args, err, wantWrongCA, out)
		}
	}

	dsnFile := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(dsnFile, []byte(dsn(inst.CAFile())), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runCommand(t, "migrate", "--postgres-dsn-file="+dsnFile); err != nil {
		t.Fatalf("migrate over verify-full: %v\n%s", err, out)
	}
	out, err := runCommand(t, "migrate", "status", "--postgres-dsn="+dsn(inst.CAFile()))
	if err != nil || !strings.Contains(out, " applied, 0 pending") {
		t.Fatalf("migrate status over verify-full: %v\n%s", err, out)
	}

	if err := inst.EnableTLS(ctx, pgtest.TLSOptions{Hosts: []string{"db.example.test"}}); err != nil {
		t.Fatal(err)
	}
	out, err = runCommand(t, "migrate", "status", "--postgres-dsn-file="+dsnFile)
	want := `is not valid for the host "127.0.0.1" the DSN connects to (it is for db.example.test)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("migrate status, certificate for another host: err %v\nwant one saying %q; output:\n%s", err, want, out)
	}
}
