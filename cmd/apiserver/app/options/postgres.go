package options

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/pflag"

	"github.com/example/platform-apiserver/pkg/apiserver"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
)

// PostgresOptions configure the connection to the registry database.
type PostgresOptions struct {
	DSN string
	// DSNFile names a file holding the DSN (a mounted Secret), which keeps
	// the password out of the process's arguments; Validate reads it into DSN.
	DSNFile     string
	ContinueTTL time.Duration
	// ReadDSNs are standbys reads may go to; StandbyWait how long a read
	// waits for one to replay what it needs; StandbyMaxLag how far behind
	// one may fall before readiness reports it.
	ReadDSNs []string
	// ReadDSNFiles name files holding standby DSNs (mounted Secrets).
	ReadDSNFiles []string
	// ReadFromPrimary: reads take turns over the primary too.
	ReadFromPrimary bool
	StandbyWait     time.Duration
	StandbyMaxLag   time.Duration
	// TCPUserTimeout and TCPKeepAlive: how soon a connection to a host that
	// vanished without a reset fails.
	TCPUserTimeout time.Duration
	TCPKeepAlive   time.Duration
	// AcquireTimeout: how long an API read waits for a connection before
	// it is answered 429.
	AcquireTimeout time.Duration
	// AllowInsecure accepts DSNs that do not verify the database's
	// certificate (sslmode below verify-ca, or none).
	AllowInsecure bool

	dsnFromFile bool
}

// NewPostgresOptions returns the defaults.
func NewPostgresOptions() *PostgresOptions {
	return &PostgresOptions{ContinueTTL: postgres.DefaultContinueTTL, StandbyWait: postgres.DefaultStandbyWait, StandbyMaxLag: postgres.DefaultStandbyMaxLag, ReadFromPrimary: true,
		TCPUserTimeout: pgdb.DefaultTCPUserTimeout, TCPKeepAlive: pgdb.DefaultTCPKeepAlive, AcquireTimeout: postgres.DefaultAcquireTimeout}
}

// AddFlags adds the registry database flags.
func (o *PostgresOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DSN, "postgres-dsn", o.DSN, ""+
		"Connection string of the registry database, as a URL (postgres://user:pass@host:5432/db?sslmode=verify-full) "+
		"or key=value pairs (host=... dbname=...). Parts left out come from the standard PG* environment "+
		"(PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE, ...) and libpq defaults.")
	fs.StringVar(&o.DSNFile, "postgres-dsn-file", o.DSNFile, ""+
		"File holding the connection string of --postgres-dsn (surrounding whitespace ignored), e.g. a key of a "+
		"mounted Secret, so the password appears in neither the arguments nor the environment. Excludes --postgres-dsn. "+
		"Each new database connection uses the user and password the file holds then, so a rotated password needs no restart "+
		"(other changes to the file take effect at the next start).")
	fs.StringArrayVar(&o.ReadDSNs, "postgres-read-dsn", o.ReadDSNs, ""+
		"Connection string of a streaming standby of the registry database that lists, gets and watches may read from "+
		"(repeat the flag for several; reads go round robin). A read goes to a standby only once it has replayed the "+
		"resourceVersion the read needs (for a list without resourceVersion, the primary's present), waiting up to "+
		"--postgres-standby-wait; else the primary answers, so no client sees a resourceVersion go backwards.")
	fs.StringArrayVar(&o.ReadDSNFiles, "postgres-read-dsn-file", o.ReadDSNFiles, ""+
		"File holding the connection string of a standby as --postgres-read-dsn takes it (repeat for several), so its "+
		"password appears in neither the arguments nor the environment; each new connection uses the credentials the "+
		"file holds then, as with --postgres-dsn-file.")
	fs.BoolVar(&o.ReadFromPrimary, "postgres-read-from-primary", o.ReadFromPrimary, ""+
		"With standbys, spread reads round robin over the primary and the standbys (so n standbys give n+1 servers' "+
		"read capacity); false keeps reads on the standbys while they can serve them, leaving the primary to writes "+
		"and to the reads a standby has not replayed far enough for.")
	fs.DurationVar(&o.StandbyWait, "postgres-standby-wait", o.StandbyWait,
		"How long a read waits for a --postgres-read-dsn standby to replay what it needs before the primary serves it.")
	fs.DurationVar(&o.StandbyMaxLag, "postgres-standby-max-lag", o.StandbyMaxLag, ""+
		"How long a --postgres-read-dsn standby may be behind the primary (or unreachable) before the readiness check "+
		"registry-standbys fails. The replica still serves correctly then (the primary answers what the standby lacks); "+
		"probes that should not take replicas out for it exclude the check: /readyz?exclude=registry-standbys.")
	fs.DurationVar(&o.TCPUserTimeout, "postgres-tcp-user-timeout", o.TCPUserTimeout, ""+
		"TCP_USER_TIMEOUT of every database connection: data the server has not acknowledged for this long closes the "+
		"connection, so a host that vanished (powered off, black-holed, a paused VM) is given up on instead of retried for "+
		"the kernel's 15 minutes. 0 turns it off.")
	fs.DurationVar(&o.TCPKeepAlive, "postgres-tcp-keepalive", o.TCPKeepAlive, ""+
		"Idle time before the first TCP keepalive probe of a database connection (then every half of it, given up after 3), "+
		"so an idle connection, such as the LISTEN one, to a vanished host fails too. 0 turns keepalive off.")
	fs.DurationVar(&o.AcquireTimeout, "postgres-acquire-timeout", o.AcquireTimeout, ""+
		"How long a list, get or usage report waits for one of the registry's read connections (the DSN's pool_max_conns, "+
		"default 20) before it is answered 429 Too Many Requests with Retry-After, rather than queueing without limit. "+
		"The change feed, discovery's writes and health checks have pools of their own and never wait on API reads.")
	fs.BoolVar(&o.AllowInsecure, "postgres-allow-insecure", o.AllowInsecure, ""+
		"Accept database connection strings (primary and standbys) that do not verify the database's certificate: "+
		"sslmode disable, allow, prefer or require, or none (libpq's default, prefer, falls back to plaintext). Without it "+
		"such a DSN is refused at start-up; set sslmode=verify-full (or verify-ca) and sslrootcert instead. DSNs that "+
		"reach Unix sockets only need no TLS.")
	fs.DurationVar(&o.ContinueTTL, "continue-token-ttl", o.ContinueTTL, ""+
		"How long a list continue token stays valid; an older one gets 410 Expired and the client restarts the list.")
}

// Validate returns every problem with the options. It reads
// --postgres-dsn-file into DSN first.
func (o *PostgresOptions) Validate() []error {
	var errs []error
	if o.DSNFile != "" && !o.dsnFromFile {
		if o.DSN != "" {
			return []error{fmt.Errorf("--postgres-dsn and --postgres-dsn-file exclude each other: set one")}
		}
		dsn, err := pgdb.ReadDSNFile(o.DSNFile)
		if err != nil {
			return []error{fmt.Errorf("--postgres-dsn-file: %w", err)}
		}
		o.DSN, o.dsnFromFile = dsn, true
	}
	errs = append(errs, o.validateTLS()...)
	if _, err := pgxpool.ParseConfig(o.DSN); err != nil {
		errs = append(errs, fmt.Errorf("--postgres-dsn: %w (expected postgres://user@host:port/db or host=... dbname=...)", err))
	}
	if o.ContinueTTL <= 0 {
		errs = append(errs, fmt.Errorf("--continue-token-ttl must be positive, got %s", o.ContinueTTL))
	}
	for _, dsn := range o.ReadDSNs {
		if _, err := pgxpool.ParseConfig(dsn); err != nil {
			errs = append(errs, fmt.Errorf("--postgres-read-dsn: %w (expected postgres://user@host:port/db or host=... dbname=...)", err))
		}
	}
	for _, file := range o.ReadDSNFiles {
		if _, err := pgdb.ReadDSNFile(file); err != nil {
			errs = append(errs, fmt.Errorf("--postgres-read-dsn-file: %w", err))
		}
	}
	if o.StandbyWait < 0 {
		errs = append(errs, fmt.Errorf("--postgres-standby-wait must be zero or positive (e.g. 250ms), got %s", o.StandbyWait))
	}
	if o.TCPUserTimeout < 0 || o.TCPKeepAlive < 0 {
		errs = append(errs, fmt.Errorf("--postgres-tcp-user-timeout and --postgres-tcp-keepalive must be zero (off) or positive, got %s and %s", o.TCPUserTimeout, o.TCPKeepAlive))
	}
	if o.AcquireTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--postgres-acquire-timeout must be positive (e.g. 3s), got %s", o.AcquireTimeout))
	}
	if o.StandbyMaxLag <= 0 {
		errs = append(errs, fmt.Errorf("--postgres-standby-max-lag must be positive (e.g. 30s), got %s", o.StandbyMaxLag))
	}
	return errs
}

// ApplyTo sets the server's registry configuration.
func (o *PostgresOptions) ApplyTo(c *apiserver.RegistryConfig) {
	*c = apiserver.RegistryConfig{DSN: o.DSN, Store: o.StoreOptions()}
}

// StoreOptions returns the registry store's options.
// With --postgres-dsn-file, new connections use the credentials the file
// holds when they are made (a rotated password needs no restart).
func (o *PostgresOptions) StoreOptions() postgres.Options {
	opts := postgres.Options{ContinueTTL: o.ContinueTTL, ReadDSNs: o.ReadDSNs, ReadDSNFiles: o.ReadDSNFiles, NoPrimaryReads: !o.ReadFromPrimary,
		StandbyWait: o.StandbyWait, StandbyMaxLag: o.StandbyMaxLag,
		TCPUserTimeout: offIfZero(o.TCPUserTimeout), TCPKeepAlive: offIfZero(o.TCPKeepAlive), AcquireTimeout: o.AcquireTimeout,
		Extension: apiserver.RegistryExtension()}
	if o.dsnFromFile {
		opts.DSNFile = o.DSNFile
	}
	return opts
}

// offIfZero maps a flag's 0 (off) to the store's negative (off; its zero
// takes the default).
func offIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
