package options

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
)

// PostgresOptions configure the connection to the registry database.
type PostgresOptions struct {
	DSN         string
	ContinueTTL time.Duration
}

// NewPostgresOptions returns the defaults.
func NewPostgresOptions() *PostgresOptions {
	return &PostgresOptions{ContinueTTL: postgres.DefaultContinueTTL}
}

// AddFlags adds the registry database flags.
func (o *PostgresOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DSN, "postgres-dsn", o.DSN, ""+
		"Connection string of the registry database, as a URL (postgres://user:pass@host:5432/db?sslmode=verify-full) "+
		"or key=value pairs (host=... dbname=...). Parts left out come from the standard PG* environment "+
		"(PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE, ...) and libpq defaults.")
	fs.DurationVar(&o.ContinueTTL, "continue-token-ttl", o.ContinueTTL, ""+
		"How long a list continue token stays valid; an older one gets 410 Expired and the client restarts the list.")
}

// Validate returns every problem with the options.
func (o *PostgresOptions) Validate() []error {
	var errs []error
	if _, err := pgxpool.ParseConfig(o.DSN); err != nil {
		errs = append(errs, fmt.Errorf("--postgres-dsn: %w (expected postgres://user@host:port/db or host=... dbname=...)", err))
	}
	if o.ContinueTTL <= 0 {
		errs = append(errs, fmt.Errorf("--continue-token-ttl must be positive, got %s", o.ContinueTTL))
	}
	return errs
}

// StoreOptions returns the registry store's options.
func (o *PostgresOptions) StoreOptions() postgres.Options {
	return postgres.Options{ContinueTTL: o.ContinueTTL}
}
