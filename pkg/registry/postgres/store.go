// Package postgres implements the registry's views (store.Source), its
// change feed and store.Writer on PostgreSQL with pgx. See docs/registry.md for the schema and the
// resourceVersion design.
//
// Store is the one type the API layer and discovery see. It holds the
// pools and delegates to one package per mechanism: pgdb (connections,
// pools, errors), schema (migrations), replicas (where reads run,
// failovers), views (declarations and reads), changelog (the change log's
// reader, compaction, LISTEN), writes (the write engine) and usage (the
// usage history).
package postgres

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/continuetoken"
	"github.com/example/platform-apiserver/pkg/registry/postgres/changelog"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/replicas"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/postgres/usage"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

var (
	_ store.Writer     = &Store{}
	_ store.ChangeFeed = &Store{}
)

// DefaultContinueTTL is how long a continue token is honoured by default.
const DefaultContinueTTL = 15 * time.Minute

// A replica that stalls in the middle of a transaction (a VM pause, SIGSTOP)
// would hold what it locked — a member's lock, or a commit ticket that every
// later writer waits for before it publishes — until it wakes. Every transaction of the
// store sends its statements back to back, so PostgreSQL may end one that
// sits idle this long; the stalled replica then finds its transaction gone.
// A DSN that sets the parameter keeps its value.
const (
	idleInTransactionParam   = "idle_in_transaction_session_timeout"
	idleInTransactionTimeout = "10s"
)

// Options tunes a Store. The zero value is fine.
type Options struct {
	// ContinueTTL is how long a continue token is honoured; default 15m.
	ContinueTTL time.Duration
	// Now is the clock for continue tokens; default time.Now.
	Now func() time.Time
	// DSNFile is the file the DSN was read from (--postgres-dsn-file): new
	// connections use the credentials it holds when they are made.
	DSNFile string
	// ReadDSNs are standbys lists, gets and the change feed may read from
	// (package replicas); none: every read goes to the primary.
	ReadDSNs []string
	// ReadDSNFiles name files holding more standby DSNs; new connections
	// to each use the credentials its file holds when they are made.
	ReadDSNFiles []string
	// NoPrimaryReads keeps reads off the primary while a standby can serve
	// them; by default reads take turns over the primary and the standbys.
	NoPrimaryReads bool
	// StandbyWait is how long a read waits for a standby to replay what it
	// needs before it goes to the primary; default 250ms.
	StandbyWait time.Duration
	// StandbyMaxLag is how long a standby may be behind the primary before
	// CheckStandbys fails; default 30s.
	StandbyMaxLag time.Duration
	// TCPUserTimeout and TCPKeepAlive make connections notice a peer that
	// vanished without a reset (pgdb.ConnOptions); zero: the defaults
	// (pgdb.DefaultTCPUserTimeout, pgdb.DefaultTCPKeepAlive), negative: off.
	TCPUserTimeout time.Duration
	TCPKeepAlive   time.Duration
	// AcquireTimeout bounds an API read's wait for a connection (see
	// openPools); zero: DefaultAcquireTimeout.
	AcquireTimeout time.Duration
	// Extension adds views of kinds declared outside the registry.
	Extension Extension
}

// Extension is what kinds declared outside the registry add to it
// (docs/kinds.md, "A kind outside this repository"): their views, in the
// change log beside the registry's own, and the migrations that make
// their tables (NNN_name.up.sql and .down.sql at its root, numbered apart
// from the registry's own).
type Extension struct {
	Views      []views.Logged
	Migrations fs.FS
}

// Store is the PostgreSQL registry. It is safe for concurrent use.
type Store struct {
	// The primary's pools, one per kind of work (openPools).
	reads, writes, feed, health *pgdb.Pool

	// replicas picks the server each read runs on and records failovers.
	replicas *replicas.Set
	// listener listens for commits on the primary and abandons its
	// connections when a read finds it hung.
	listener *changelog.Listener
	opts     Options
	// changeLog is the change log the change feed reads (registryLog).
	changeLog *changelog.Log

	codecMu sync.Mutex
	codec   *continuetoken.Codec // loaded from registry_secret on first use

	// engine writes on the writes pool (package writes).
	engine *writes.Engine
	// usage records the usage history through engine (package usage).
	usage *usage.Recorder
}

// Open creates a connection pool for dsn ("" means libpq defaults and the
// PG* environment). It does not connect; Ready tells whether the database is
// reachable and migrated.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if opts.ContinueTTL <= 0 {
		opts.ContinueTTL = DefaultContinueTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AcquireTimeout <= 0 {
		opts.AcquireTimeout = DefaultAcquireTimeout
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse postgres dsn: %w", err)
	}
	raiseMaxConns(cfg, dsn)
	if _, set := cfg.ConnConfig.RuntimeParams[idleInTransactionParam]; !set {
		cfg.ConnConfig.RuntimeParams[idleInTransactionParam] = idleInTransactionTimeout
	}
	// Timeouts, TLS errors, the DSN file's credentials:
	pgdb.ConfigureConnections(cfg, dsn, pgdb.ConnOptions{DSNFile: opts.DSNFile, TCPUserTimeout: opts.TCPUserTimeout, TCPKeepAlive: opts.TCPKeepAlive})
	schema.SetWriteProtocol(cfg)
	s := &Store{opts: opts, changeLog: changeLogOf(opts.Extension), replicas: replicas.New(replicas.Options{
		Wait: opts.StandbyWait, MaxLag: opts.StandbyMaxLag, NoPrimaryReads: opts.NoPrimaryReads,
	})}
	// Every new connection to the primary first checks for a failover.
	cfg.AfterConnect = s.replicas.AfterConnect
	if err := s.openPools(ctx, cfg); err != nil {
		return nil, err
	}
	s.listener = changelog.NewListener(s.feed, s.primaryPools(), s.replicas.Saw)
	s.engine = writes.New(s.writes)
	s.usage = usage.NewRecorder(s.engine, s.writes)
	for _, dsn := range opts.ReadDSNs {
		if err := s.addStandby(ctx, dsn, ""); err != nil {
			s.Close()
			return nil, err
		}
	}
	for _, file := range opts.ReadDSNFiles {
		dsn, err := pgdb.ReadDSNFile(file)
		if err == nil {
			err = s.addStandby(ctx, dsn, file)
		}
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// The primary is reached through four pools, so that no kind of work can
// starve another of connections:
//
//   - reads: API lists, gets and usage reports. Its size is the DSN's
//     pool_max_conns (default defaultMaxConns). An acquire waits at most
//     Options.AcquireTimeout, then the request is answered 429 (store.ErrBusy).
//   - writes: discovery's writes and reads, maintenance, migrations
//     (writesPoolSize). Writers wait for a connection as long as their
//     context allows: they commit in ticket order anyway.
//   - feed: the change feed's follower and the history reads of watches
//     resuming below its window (feedPoolSize).
//   - health: readiness checks (healthPoolSize).
//
// A standby has one pool, of the reads' size, with the reads' acquire
// timeout; a read it cannot serve goes to the primary's pool for its kind.
// What a pool does is package pgdb's (pgdb.Pool).
const (
	// defaultMaxConns is the reads pool's size unless the DSN sets
	// pool_max_conns. pgxpool's default is max(4, CPUs): on a small machine
	// a fleet's lists, gets and watches queued for four connections.
	defaultMaxConns = 20
	// writesPoolSize: discovery's writers commit in ticket order, and
	// views sections share the database's cores, so a few connections
	// keep it busy; the rest carry member sections,
	// cursors and maintenance.
	writesPoolSize = 8
	// feedPoolSize: the follower's read and the history reads
	// (feed.DefaultHistoryReads, 4) with one to spare.
	feedPoolSize = 6
	// healthPoolSize is how many connections readiness checks may hold.
	healthPoolSize = 2
)

// DefaultAcquireTimeout is Options.AcquireTimeout's default.
const DefaultAcquireTimeout = 3 * time.Second

// openPools creates the primary's pools from cfg.
func (s *Store) openPools(ctx context.Context, cfg *pgxpool.Config) error {
	for _, p := range []struct {
		dst            **pgdb.Pool
		name           string
		size           int32
		acquireTimeout time.Duration
	}{
		{&s.reads, "reads", 0, s.opts.AcquireTimeout},
		{&s.writes, "writes", writesPoolSize, 0},
		{&s.feed, "feed", feedPoolSize, 0},
		{&s.health, "health", healthPoolSize, 0},
	} {
		pool, err := pgdb.NewPool(ctx, p.name, cfg, p.size, p.acquireTimeout)
		if err != nil {
			s.closePools()
			return err
		}
		*p.dst = pool
	}
	return nil
}

// primaryPools are the primary's pools that are open.
func (s *Store) primaryPools() []*pgdb.Pool {
	var open []*pgdb.Pool
	for _, p := range []*pgdb.Pool{s.reads, s.writes, s.feed, s.health} {
		if p != nil {
			open = append(open, p)
		}
	}
	return open
}

func (s *Store) closePools() {
	for _, p := range s.primaryPools() {
		p.Close()
	}
}

// addStandby adds a pool on the standby of dsn (read from file, if set).
func (s *Store) addStandby(ctx context.Context, dsn, file string) error {
	rc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("parse postgres read dsn: %w", err)
	}
	raiseMaxConns(rc, dsn)
	pgdb.ConfigureConnections(rc, dsn, pgdb.ConnOptions{DSNFile: file, TCPUserTimeout: s.opts.TCPUserTimeout, TCPKeepAlive: s.opts.TCPKeepAlive}) // as for the primary
	schema.SetWriteProtocol(rc)
	name := rc.ConnConfig.Host + ":" + fmt.Sprint(rc.ConnConfig.Port)
	rp, err := pgdb.NewPool(ctx, "standby "+name, rc, 0, s.opts.AcquireTimeout)
	if err != nil {
		return err
	}
	s.replicas.Add(name, rp)
	return nil
}

// raiseMaxConns sets the reads pool's size to defaultMaxConns unless the
// DSN sets pool_max_conns; a standby serving a replica's reads needs as
// many.
func raiseMaxConns(cfg *pgxpool.Config, dsn string) {
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, defaultMaxConns)
	}
}

// sqlContinueKey reads the continue tokens' shared key.
var sqlContinueKey = statement("store_continue_key")

// Close closes the pools.
func (s *Store) Close() {
	s.closePools()
	s.replicas.Close()
}

// DefaultStandbyWait and DefaultStandbyMaxLag are Options.StandbyWait's
// and Options.StandbyMaxLag's defaults.
const (
	DefaultStandbyWait   = replicas.DefaultStandbyWait
	DefaultStandbyMaxLag = replicas.DefaultStandbyMaxLag
)

// readTx runs fn in a REPEATABLE READ READ ONLY transaction (one snapshot)
// for an API read: on a standby, or the primary's reads pool
// (replicas.Set.ReadTx).
func (s *Store) readTx(ctx context.Context, f store.Freshness, fn func(pgx.Tx) error) error {
	return s.replicas.ReadTx(ctx, s.reads, f, fn)
}

// LatestSeen is the highest registry resourceVersion this process has seen
// exist (notifications, the present that reads found): how far the change
// feed's follower could be.
func (s *Store) LatestSeen() int64 { return s.replicas.LatestSeen() }

// CheckStandbys fails when a standby of Options.ReadDSNs has been behind
// the primary for longer than Options.StandbyMaxLag, or cannot be asked
// (replicas.Set.CheckStandbys). Without standbys it passes.
func (s *Store) CheckStandbys(ctx context.Context) error {
	return s.replicas.CheckStandbys(ctx, s.health)
}

// continueCodec returns the token codec keyed by the registry's shared secret.
func (s *Store) continueCodec(ctx context.Context) (*continuetoken.Codec, error) {
	s.codecMu.Lock()
	defer s.codecMu.Unlock()
	if s.codec != nil {
		return s.codec, nil
	}
	var key []byte
	if err := s.reads.QueryRow(ctx, sqlContinueKey).Scan(&key); err != nil {
		return nil, fmt.Errorf("load continue token key: %w", pgdb.InterpretError(err))
	}
	codec, err := continuetoken.NewCodec(key, continuetoken.Options{TTL: s.opts.ContinueTTL, Now: s.opts.Now})
	if err != nil {
		return nil, err
	}
	s.codec = codec
	return codec, nil
}
