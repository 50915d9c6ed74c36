package options

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
)

// allowInsecureFlag lets DSNs connect without verifying the server.
const allowInsecureFlag = "--postgres-allow-insecure"

// insecureDSN says why dsn would reach a database over TCP without
// verifying its certificate (sslmode below verify-ca, which also allows
// plaintext up to prefer), or returns "" when it verifies it or reaches
// Unix sockets only. sslmode is one setting for every host of a multi-host
// DSN; what the DSN leaves out comes from PGSSLMODE, as for the connection.
// A DSN pgx cannot parse returns "": the parse check reports it.
func insecureDSN(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil || unixSocketsOnly(cfg) {
		return ""
	}
	switch mode := pgdb.DSNSetting(dsn, "sslmode", "PGSSLMODE"); mode {
	case "verify-ca", "verify-full":
		return ""
	case "":
		if pgdb.DSNSetting(dsn, "sslrootcert", "PGSSLROOTCERT") == "system" {
			return "" // verify-full against the system's CAs
		}
		return "sets no sslmode (the default, prefer, takes TLS without verifying the server and falls back to plaintext)"
	case "disable":
		return "has sslmode=disable (plaintext)"
	default:
		return fmt.Sprintf("has sslmode=%s, which does not verify the server's certificate", mode)
	}
}

func unixSocketsOnly(cfg *pgconn.Config) bool {
	if network, _ := pgconn.NetworkAddress(cfg.Host, cfg.Port); network != "unix" {
		return false
	}
	for _, fb := range cfg.Fallbacks {
		if network, _ := pgconn.NetworkAddress(fb.Host, fb.Port); network != "unix" {
			return false
		}
	}
	return true
}

// insecureDSNError is the start-up error for a DSN given by flag that
// insecureDSN refuses.
func insecureDSNError(flag, why string) error {
	return fmt.Errorf("%s %s: set sslmode=verify-full (or verify-ca) and sslrootcert=<file of the CA that issued the "+
		"database's certificate> (sslrootcert=system for the system's CAs), or pass %s to connect without verifying "+
		"the database (a local database, or a network you trust)", flag, why, allowInsecureFlag)
}

// validateTLS refuses, unless AllowInsecure, every DSN (primary and
// standbys, from flags or files) that would not verify the database.
func (o *PostgresOptions) validateTLS() []error {
	if o.AllowInsecure {
		return nil
	}
	var errs []error
	check := func(flag, dsn string) {
		if why := insecureDSN(dsn); why != "" {
			errs = append(errs, insecureDSNError(flag, why))
		}
	}
	primary := "--postgres-dsn"
	if o.dsnFromFile {
		primary = "--postgres-dsn-file " + o.DSNFile
	}
	check(primary, o.DSN)
	for _, dsn := range o.ReadDSNs {
		check("--postgres-read-dsn", dsn)
	}
	for _, file := range o.ReadDSNFiles {
		if dsn, err := pgdb.ReadDSNFile(file); err == nil {
			check("--postgres-read-dsn-file "+file, dsn)
		}
	}
	return errs
}
