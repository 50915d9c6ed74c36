// Package replicas is where the registry's reads run and what happens when
// its primary changes: the standbys a read may go to (once one has replayed
// what the read needs; else the primary serves it), their lag for
// readiness, the highest resourceVersion this process has seen exist, and
// the record of a failover or rewind (registry_epoch) that keeps every
// resourceVersion a client saw from being handed out again. It opens no
// pools (the store does, with package pgdb) and runs no view's query (its
// callers pass their reads as functions). See docs/registry.md, "Standbys
// and failover".
package replicas

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// standby is a read-only server the registry's reads may go to.
type standby struct {
	name string // host:port, for metrics and logs
	pool *pgdb.Pool
	// replayed is the registry resourceVersion the standby was last seen
	// to hold (with the schema this binary reads); it only grows.
	replayed atomic.Int64
	// lagging: its last wait ran out; until it holds what a read needs,
	// reads ask it once without waiting, so a stuck standby does not slow
	// every read down by the wait.
	lagging atomic.Bool
	// skipUntil (unix nanoseconds): after a failed query reads skip the
	// standby for standbyRetry, so a standby that is down does not add a
	// connection attempt to every read.
	skipUntil atomic.Int64
}

// standbyRetry is how long reads skip a standby whose query failed.
const standbyRetry = 5 * time.Second

// standbyReadTimeout bounds a read on a standby before the primary serves
// it instead. Reads are pages and point lookups (tens of milliseconds on
// a fleet of 250,000 nodes); one slower than this runs again on the
// primary.
const standbyReadTimeout = time.Second

// Options tunes a Set. The zero value is fine.
type Options struct {
	// Wait is how long a read waits for a standby to replay what it needs
	// before it goes to the primary; default DefaultStandbyWait.
	Wait time.Duration
	// MaxLag is how far behind the primary a standby may fall before
	// CheckStandbys reports it; default DefaultStandbyMaxLag.
	MaxLag time.Duration
	// NoPrimaryReads keeps reads off the primary while a standby can serve
	// them; by default reads take turns over the primary and the standbys.
	NoPrimaryReads bool
}

// Set spreads reads over the primary and its standbys, and keeps what this
// process knows of the primary's timeline. It is safe for concurrent use
// once its standbys are added (Add).
type Set struct {
	list []*standby
	next atomic.Uint64
	opts Options
	// seen is the highest registry resourceVersion this process has seen
	// exist (the primary's present, notifications, reads): a change-feed
	// read needs at least this much, so the follower and the watches it
	// serves never go back to an older state of a standby.
	seen atomic.Int64
	// floor is the first resourceVersion of the registry's current
	// timeline after a failover (0 before any): a standby that has not
	// replayed it may still hold changes the failover lost.
	floor atomic.Int64
	// floorKnown: floor was read from the primary (AfterConnect, Present).
	floorKnown atomic.Bool
}

// DefaultStandbyWait: a standby that streams is milliseconds behind; one
// that is further behind than this serves no fresh reads (the primary does).
const DefaultStandbyWait = 250 * time.Millisecond

// DefaultStandbyMaxLag is how far behind the primary a standby may fall
// before readiness reports it.
const DefaultStandbyMaxLag = 30 * time.Second

// New returns a Set without standbys: every read goes to the primary.
func New(opts Options) *Set {
	if opts.Wait <= 0 {
		opts.Wait = DefaultStandbyWait
	}
	if opts.MaxLag <= 0 {
		opts.MaxLag = DefaultStandbyMaxLag
	}
	return &Set{opts: opts}
}

// Add makes the standby reached through pool, named host:port, serve reads.
func (r *Set) Add(name string, pool *pgdb.Pool) {
	sb := &standby{name: name, pool: pool}
	sb.replayed.Store(-1) // nothing known yet, not even the schema
	r.list = append(r.list, sb)
}

// Pools are the standbys' pools, for their metrics.
func (r *Set) Pools() []*pgdb.Pool {
	pools := make([]*pgdb.Pool, 0, len(r.list))
	for _, sb := range r.list {
		pools = append(pools, sb.pool)
	}
	return pools
}

// Close closes the standbys' pools.
func (r *Set) Close() {
	for _, sb := range r.list {
		sb.pool.Close()
	}
}

// metricsSubsystem begins the metrics' names, as every registry metric's.
const metricsSubsystem = "platform_registry"

// Reads served per server: on a standby, or on the primary because no
// standby had replayed far enough in time (or none is configured).
var (
	readsByServer = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "reads_total",
		Help:           "Registry reads (lists, gets, change-feed reads) by where they ran: standby, or primary (no standby configured, or none had replayed the resourceVersion the read needs within the wait).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"server"})
	standbyLag = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "standby_lag_resource_versions",
		Help:           "How many resourceVersions a standby was behind the primary when last compared, per standby (host:port).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"standby"})
	standbyReplayLag = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "standby_replay_lag_seconds",
		Help:           "How long a standby (host:port) has been behind the primary's present when readiness last checked: 0 when it held the present, else the age of the last commit it replayed (an upper bound); -1 when it could not be asked.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"standby"})
	failoversTotal = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "failovers_total",
		Help:           "Failovers of the registry database this replica recorded (a new primary timeline, or the registry gone back: see rewinds_total); see registry_epoch for the lost resourceVersions.",
		StabilityLevel: metrics.ALPHA,
	})
	rewindsTotal = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "rewinds_total",
		Help:           "Times this replica found the registry's resourceVersion below one it had read (restored from a backup or snapshot, or acknowledged commits lost on the same timeline) and recorded it as a failover.",
		StabilityLevel: metrics.ALPHA,
	})
)

// Metrics are the metrics of reads, standbys, failovers and rewinds, to
// register once per process.
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{readsByServer, standbyLag, standbyReplayLag, failoversTotal, rewindsTotal}
}

// readPool returns the pool a read that needs freshness f runs on: a
// standby's or primary, the primary's pool for the read's kind. Reads
// take turns (round robin) over the standbys and, unless
// Options.NoPrimaryReads, the primary; a standby serves its turn once it
// has replayed what f needs, waiting for that up to Options.Wait,
// else the primary does. A read needing the latest state first asks the
// primary for its present (one row). No read goes to a standby that has
// not replayed the current timeline's floor.
func (r *Set) readPool(ctx context.Context, primary *pgdb.Pool, f store.Freshness) (*pgdb.Pool, error) {
	servers := uint64(len(r.list))
	if !r.opts.NoPrimaryReads {
		servers++
	}
	turn := r.next.Add(1) % max(servers, 1)
	if turn >= uint64(len(r.list)) {
		readsByServer.WithLabelValues("primary").Inc()
		return primary, nil
	}
	if !r.floorKnown.Load() {
		// The first read of a process: learn the floor from the primary.
		if _, err := r.Present(ctx, primary); err != nil {
			return nil, err
		}
	}
	need := max(f.AtLeast, r.floor.Load())
	if f.Latest {
		present, err := r.Present(ctx, primary)
		if err != nil {
			return nil, err
		}
		need = max(need, present)
	}
	sb := r.list[turn]
	if time.Now().UnixNano() < sb.skipUntil.Load() {
		readsByServer.WithLabelValues("primary").Inc()
		return primary, nil
	}
	wait := r.opts.Wait
	if sb.lagging.Load() {
		wait = 0
	}
	ok, behind, err := sb.waitReplayed(ctx, need, wait)
	switch {
	case err != nil && ctx.Err() == nil:
		sb.skip(ctx, err)
	case err == nil:
		sb.lagging.Store(!ok)
		if f.Latest {
			// Only a latest read compares with the primary's present.
			standbyLag.WithLabelValues(sb.name).Set(float64(behind))
		}
	}
	if err != nil || !ok {
		readsByServer.WithLabelValues("primary").Inc()
		return primary, nil //nolint:nilerr // a standby that fails or lags is skipped: the primary serves
	}
	readsByServer.WithLabelValues("standby").Inc()
	return sb.pool, nil
}

// waitReplayed reports whether the standby holds resourceVersion need,
// polling it for up to wait, and how far behind need it was when first
// asked (0 when it was known to hold it).
func (sb *standby) waitReplayed(ctx context.Context, need int64, wait time.Duration) (ok bool, behind int64, err error) {
	if sb.replayed.Load() >= need {
		return true, 0, nil
	}
	deadline := time.Now().Add(wait)
	// A standby that does not answer within a second is treated as failed,
	// whatever the connect timeout.
	qctx, cancel := context.WithTimeout(ctx, wait+time.Second)
	defer cancel()
	for delay, first := time.Millisecond, true; ; delay, first = min(2*delay, 20*time.Millisecond), false {
		rv, err := sb.replayedVersion(qctx)
		if err != nil {
			return false, behind, err
		}
		if first {
			behind = max(0, need-rv)
		}
		if rv >= need {
			return true, behind, nil
		}
		if time.Now().Add(delay).After(deadline) {
			return false, behind, nil
		}
		select {
		case <-ctx.Done():
			return false, behind, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// ReadTx runs fn in a REPEATABLE READ READ ONLY transaction (one snapshot)
// on the pool readPool picks for f, with primary the primary's pool for the
// read. If that is a standby and it does not answer (down, restarting,
// promoted away), reads skip it for a while and fn runs again on the
// primary; a standby whose connections are all in use passes the read to
// the primary too.
func (r *Set) ReadTx(ctx context.Context, primary *pgdb.Pool, f store.Freshness, fn func(pgx.Tx) error) error {
	pool, err := r.readPool(ctx, primary, f)
	if err != nil {
		return err
	}
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	if pool == primary {
		return pool.ReadTx(ctx, opts, fn)
	}
	// A standby gets standbyReadTimeout: one that does not answer in
	// time (hung: SIGSTOPped, its host paused) is skipped for this read
	// and the next ones, which the primary serves, and its silence is
	// never taken for the primary's (the feed's deadline cuts the
	// primary's connections).
	sctx, cancel := context.WithTimeout(ctx, standbyReadTimeout)
	err = pool.ReadTx(sctx, opts, fn)
	timedOut := errors.Is(sctx.Err(), context.DeadlineExceeded)
	cancel()
	if err == nil || ctx.Err() != nil {
		return err
	}
	busy := errors.Is(err, store.ErrBusy)
	if !busy && !timedOut && !errors.Is(pgdb.InterpretError(err), store.ErrUnavailable) {
		return err
	}
	if !busy {
		for _, sb := range r.list {
			if sb.pool == pool {
				sb.skip(ctx, err)
			}
		}
	}
	readsByServer.WithLabelValues("primary").Inc()
	return primary.ReadTx(ctx, opts, fn)
}

// skip makes reads skip the standby for standbyRetry after it failed.
func (sb *standby) skip(ctx context.Context, err error) {
	sb.skipUntil.Store(time.Now().Add(standbyRetry).UnixNano())
	klog.FromContext(ctx).V(2).Info("A registry standby failed; reads skip it for a while", "standby", sb.name, "retryAfter", standbyRetry, "err", err)
}

// sqlStandbyReplayed reads a standby's registry version and schema.
var sqlStandbyReplayed = statement("standby_replayed")

// schemaVersion is the newest migration this binary knows: a standby
// serves reads only once it has replayed it.
var schemaVersion = func() int {
	v, err := schema.LatestVersion()
	if err != nil {
		panic(fmt.Sprintf("postgres: no embedded migrations: %v", err))
	}
	return v
}()

// replayedVersion is the registry resourceVersion the standby holds, -1
// while it has not replayed the schema this binary reads with.
func (sb *standby) replayedVersion(ctx context.Context) (int64, error) {
	var rv int64
	var schema int
	err := sb.pool.QueryRow(ctx, sqlStandbyReplayed).Scan(&rv, &schema)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable:
		return -1, nil // not even the first migration replayed yet
	case err != nil:
		return 0, err
	}
	if schema < schemaVersion {
		return -1, nil
	}
	raise(&sb.replayed, rv)
	return rv, nil
}

// sqlPresentAndFloor reads the primary's present and its timeline's floor.
var sqlPresentAndFloor = statement("read_present_and_floor")

// Present reads the primary's registry resourceVersion, and the floor, on
// the primary's pool primary.
func (r *Set) Present(ctx context.Context, primary *pgdb.Pool) (int64, error) {
	var rv, floor int64
	scan := func(row pgx.Row) (struct{}, error) { return struct{}{}, row.Scan(&rv, &floor) }
	if _, err := pgdb.GetRow(ctx, primary, scan, sqlPresentAndFloor); err != nil {
		return 0, fmt.Errorf("read the registry's present: %w", pgdb.InterpretError(err))
	}
	r.Saw(rv)
	r.learnFloor(floor)
	return rv, nil
}

// learnFloor records the current timeline's floor, read from the primary.
func (r *Set) learnFloor(floor int64) {
	raise(&r.floor, floor)
	r.floorKnown.Store(true)
}

// LatestSeen is the highest registry resourceVersion this process has seen
// exist (notifications, the present that reads found): how far the change
// feed's follower could be.
func (r *Set) LatestSeen() int64 { return r.seen.Load() }

// Saw records that resourceVersion rv exists (see Set.seen).
func (r *Set) Saw(rv int64) { raise(&r.seen, rv) }

// raise sets v to rv if that is higher.
func raise(v *atomic.Int64, rv int64) {
	for {
		cur := v.Load()
		if rv <= cur || v.CompareAndSwap(cur, rv) {
			return
		}
	}
}

// CheckStandbys fails when a standby has been behind the primary for
// longer than Options.MaxLag, or cannot be asked, and sets
// standby_replay_lag_seconds; it asks the primary for its present on
// primary. Such a standby serves no read that needs what it lacks (the
// primary does), so this reports a degraded set-up, not wrong answers.
// Without standbys it passes.
func (r *Set) CheckStandbys(ctx context.Context, primary *pgdb.Pool) error {
	if len(r.list) == 0 {
		return nil
	}
	present, err := r.Present(ctx, primary)
	if err != nil {
		return err
	}
	var problems []string
	for _, sb := range r.list {
		lag, err := sb.lagBehind(ctx, present)
		if err != nil {
			standbyReplayLag.WithLabelValues(sb.name).Set(-1)
			problems = append(problems, fmt.Sprintf("standby %s cannot be asked how far it has replayed: %v", sb.name, pgdb.InterpretError(err)))
			continue
		}
		standbyReplayLag.WithLabelValues(sb.name).Set(lag.Seconds())
		if lag > r.opts.MaxLag {
			problems = append(problems, fmt.Sprintf("standby %s is %s behind the primary (limit %s, --postgres-standby-max-lag)",
				sb.name, lag.Round(time.Millisecond), r.opts.MaxLag))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s; the primary serves the reads it would", strings.Join(problems, "; "))
	}
	return nil
}

// sqlStandbyReplay reads a standby's registry version and the age of the
// last commit it replayed.
var sqlStandbyReplay = statement("standby_replay")

// lagBehind is 0 when the standby holds present, else how long ago the
// last commit it replayed was made: the standby has been behind at most
// that long, and is at least that stale for a reader of the present.
func (sb *standby) lagBehind(ctx context.Context, present int64) (time.Duration, error) {
	var rv int64
	var age float64
	if err := sb.pool.QueryRow(ctx, sqlStandbyReplay).Scan(&rv, &age); err != nil {
		return 0, err
	}
	switch {
	case rv >= present:
		return 0, nil
	case age < 0:
		return 0, fmt.Errorf("it holds resourceVersion %d of the primary's %d and has replayed no commit since it started", rv, present)
	}
	return time.Duration(age * float64(time.Second)), nil
}
