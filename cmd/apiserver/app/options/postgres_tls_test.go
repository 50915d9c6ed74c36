package options

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInsecureDSN: every form of DSN (URL, key=value, several hosts, the
// PGSSLMODE environment) is refused below verify-ca, and accepted with
// verify-ca, verify-full, sslrootcert=system or Unix sockets only.
func TestInsecureDSN(t *testing.T) {
	tests := []struct {
		name     string
		dsn      string
		env      string // PGSSLMODE
		wantWhy  string // "" = accepted
		wantMode string
	}{
		{name: "URL without sslmode", dsn: "postgres://u@db.example.com:5432/platform", wantWhy: "sets no sslmode"},
		{name: "URL disable", dsn: "postgres://u@db.example.com/platform?sslmode=disable", wantWhy: "sslmode=disable"},
		{name: "URL allow", dsn: "postgres://u@db.example.com/platform?sslmode=allow", wantWhy: "sslmode=allow"},
		{name: "URL prefer", dsn: "postgresql://u@db.example.com/platform?sslmode=prefer", wantWhy: "sslmode=prefer"},
		{name: "URL require", dsn: "postgres://u@db.example.com/platform?sslmode=require", wantWhy: "sslmode=require"},
		{name: "URL verify-ca", dsn: "postgres://u@db.example.com/platform?sslmode=verify-ca"},
		{name: "URL verify-full", dsn: "postgres://u:p@db.example.com/platform?sslmode=verify-full&connect_timeout=5"},
		{name: "URL sslrootcert=system", dsn: "postgres://u@db.example.com/platform?sslrootcert=system"},
		{name: "multi-host URL without sslmode", dsn: "postgres://u@db-0:5432,db-1:5432/platform?target_session_attrs=read-write", wantWhy: "sets no sslmode"},
		{name: "multi-host URL verify-full", dsn: "postgres://u@db-0:5432,db-1:5432/platform?sslmode=verify-full&target_session_attrs=read-write"},
		{name: "key=value without sslmode", dsn: "host=db.example.com dbname=platform user=u", wantWhy: "sets no sslmode"},
		{name: "key=value require", dsn: "host=db.example.com dbname=platform sslmode=require", wantWhy: "sslmode=require"},
		{name: "key=value quoted verify-full", dsn: "host=db.example.com password='a b' sslmode='verify-full'"},
		{name: "multi-host key=value disable", dsn: "host=db-0,db-1 port=5432,5433 sslmode=disable", wantWhy: "sslmode=disable"},
		{name: "multi-host key=value verify-ca", dsn: "host=db-0,db-1 port=5432,5433 sslmode=verify-ca"},
		{name: "environment sets verify-full", dsn: "host=db.example.com dbname=platform", env: "verify-full"},
		{name: "environment sets require", dsn: "postgres://u@db.example.com/platform", env: "require", wantWhy: "sslmode=require"},
		{name: "DSN overrides the environment", dsn: "postgres://u@db.example.com/platform?sslmode=disable", env: "verify-full", wantWhy: "sslmode=disable"},
		{name: "Unix socket needs no TLS", dsn: "host=/var/run/postgresql dbname=platform"},
		{name: "Unix socket and a TCP host", dsn: "host=/var/run/postgresql,db.example.com dbname=platform", wantWhy: "sets no sslmode"},
		{name: "unparsable: left to the parse check", dsn: "postgres://[::1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PGSSLMODE", tc.env)
			if tc.env == "" {
				os.Unsetenv("PGSSLMODE") //nolint:errcheck // t.Setenv restores it
			}
			got := insecureDSN(tc.dsn)
			if (got == "") != (tc.wantWhy == "") || !strings.Contains(got, tc.wantWhy) {
				t.Errorf("insecureDSN(%q) = %q, want %q", tc.dsn, got, tc.wantWhy)
			}
		})
	}
}

// TestValidateRefusesInsecureDSNs: Validate names each refused DSN's flag
// (never its password) and what to set; --postgres-allow-insecure accepts them.
func TestValidateRefusesInsecureDSNs(t *testing.T) {
	t.Setenv("PGSSLMODE", "")
	os.Unsetenv("PGSSLMODE") //nolint:errcheck // t.Setenv restores it
	dir := t.TempDir()
	dsnFile, readFile := filepath.Join(dir, "dsn"), filepath.Join(dir, "read-0")
	for file, dsn := range map[string]string{dsnFile: "postgres://u:hunter2@db/platform", readFile: "host=db-r password=hunter2 sslmode=require"} {
		if err := os.WriteFile(file, []byte(dsn+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	newOpts := func(allow bool) *PostgresOptions {
		o := NewPostgresOptions()
		o.DSNFile = dsnFile
		o.ReadDSNs = []string{"postgres://u:hunter2@db-r/platform?sslmode=verify-full", "postgres://u:hunter2@db-r2/platform?sslmode=prefer"}
		o.ReadDSNFiles = []string{readFile}
		o.AllowInsecure = allow
		return o
	}
	var msgs []string
	for _, err := range newOpts(false).Validate() {
		msgs = append(msgs, err.Error())
	}
	all := strings.Join(msgs, "\n")
	if len(msgs) != 3 {
		t.Fatalf("got %d errors, want 3 (dsn file, one read dsn, read dsn file):\n%s", len(msgs), all)
	}
	for _, want := range []string{"--postgres-dsn-file " + dsnFile + " sets no sslmode", "--postgres-read-dsn has sslmode=prefer",
		"--postgres-read-dsn-file " + readFile + " has sslmode=require", "sslmode=verify-full", "--postgres-allow-insecure"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "hunter2") {
		t.Errorf("errors show a password:\n%s", all)
	}
	if errs := newOpts(true).Validate(); len(errs) > 0 {
		t.Errorf("with --postgres-allow-insecure: %v, want no error", errs)
	}
}
