package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

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

// busyRetryAfter is the Retry-After of a request refused for want of a
// connection: slow readers hold connections for seconds, not minutes.
const busyRetryAfter = 1

// connPool is one of the store's pools, named for metrics and errors.
type connPool struct {
	*pgxpool.Pool
	name string
	// acquireTimeout bounds the wait for a connection; 0: the context's.
	acquireTimeout time.Duration
	// busy counts acquires refused after acquireTimeout.
	busy atomic.Int64
	// conns are the pool's connections, to cut in use or not (cutAll).
	conns connSet
}

// newConnPool creates a pool of size connections (0: cfg's own size).
func newConnPool(ctx context.Context, name string, cfg *pgxpool.Config, size int32, acquireTimeout time.Duration) (*connPool, error) {
	cfg = cfg.Copy()
	if size > 0 {
		cfg.MaxConns = size
	}
	cfg.MinConns = min(cfg.MinConns, cfg.MaxConns)
	cp := &connPool{name: name, acquireTimeout: acquireTimeout}
	afterConnect := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if afterConnect != nil {
			if err := afterConnect(ctx, conn); err != nil {
				return err
			}
		}
		cp.conns.add(conn.PgConn())
		return nil
	}
	// Every publish checks it (migration 028).
	cfg.ConnConfig.RuntimeParams[schema.WriteProtocolParam] = strconv.Itoa(schema.WriteProtocol)
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set {
		// pg_stat_activity tells the pools' sessions apart.
		cfg.ConnConfig.RuntimeParams["application_name"] = "platform-apiserver-" + strings.Fields(name)[0]
	}
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create postgres %s pool: %w", name, pgdb.InterpretError(err))
	}
	cp.Pool = p
	return cp, nil
}

// cutAll closes every connection of the pool, idle or in use: a statement
// waiting on an unresponsive server fails now instead of at its deadline,
// and the pool makes new connections, to whichever server the DSN reaches
// now. (pgxpool's Reset closes connections in use only once returned.)
func (p *connPool) cutAll() {
	p.Reset()
	p.conns.cut()
}

// connSet holds a pool's open connections. Connections are added when made
// and dropped once closed: the pool has no hook for a destroyed one.
type connSet struct {
	mu    sync.Mutex
	conns map[*pgconn.PgConn]struct{}
	// spared are not cut: a migration's, which may hold locks that keep
	// a change-feed read waiting past its timeout on a healthy server.
	spared map[*pgconn.PgConn]bool
}

// spare keeps conn from being cut until the returned function is called.
func (c *connSet) spare(conn *pgconn.PgConn) (done func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spared == nil {
		c.spared = map[*pgconn.PgConn]bool{}
	}
	c.spared[conn] = true
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.spared, conn)
	}
}

// servers returns the addresses of the servers the set's open connections
// are on.
func (c *connSet) servers() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	addrs := map[string]bool{}
	for k := range c.conns {
		if !k.IsClosed() {
			addrs[k.Conn().RemoteAddr().String()] = true
		}
	}
	return addrs
}

func (c *connSet) add(conn *pgconn.PgConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns == nil {
		c.conns = map[*pgconn.PgConn]struct{}{}
	}
	for k := range c.conns {
		if k.IsClosed() {
			delete(c.conns, k)
		}
	}
	c.conns[conn] = struct{}{}
}

// cut closes the sockets of the set's connections. Closing a socket is
// safe while another goroutine reads from it: that read fails, and pgconn
// closes the connection, which its pool then destroys.
func (c *connSet) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.conns {
		if c.spared[k] {
			continue
		}
		if !k.IsClosed() {
			_ = k.Conn().Close()
		}
		delete(c.conns, k)
	}
}

// acquire takes a connection. From a pool whose connections are all in
// use it waits at most the pool's acquire timeout, then answers
// store.ErrBusy, so a request gets 429 with Retry-After instead of queueing
// without limit. A wait that ran out while connections were being made
// (freed ones replaced) is the database not answering: store.ErrUnavailable.
func (p *connPool) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	if st := p.Stat(); p.acquireTimeout <= 0 || st.AcquiredConns() < st.MaxConns() {
		// A connection is idle or may be made: making one takes what
		// connecting takes (after a failover that left the old primary's
		// sockets open, its connect timeout first), not the wait for a
		// busy pool.
		conn, err := p.Acquire(ctx)
		return conn, pgdb.InterpretError(err)
	}
	actx, cancel := context.WithTimeout(ctx, p.acquireTimeout)
	defer cancel()
	conn, err := p.Acquire(actx)
	if err == nil || ctx.Err() != nil || !errors.Is(actx.Err(), context.DeadlineExceeded) {
		return conn, pgdb.InterpretError(err)
	}
	if st := p.Stat(); st.AcquiredConns() >= st.MaxConns() {
		p.busy.Add(1)
		return nil, &store.BusyError{RetryAfterSeconds: busyRetryAfter,
			Message: fmt.Sprintf("all %d registry connections for %s are in use: no connection was free within %s", st.MaxConns(), p.name, p.acquireTimeout)}
	}
	return nil, fmt.Errorf("%w: no connection to the registry database within %s: %w", store.ErrUnavailable, p.acquireTimeout, err)
}

// getRow runs a one-row query on a connection p.acquire gives and scans
// the row with scan (see read for a connection that died idle).
func getRow[T any](ctx context.Context, p *connPool, scan func(pgx.Row) (T, error), sql string, args ...any) (T, error) {
	var v T
	err := p.read(ctx, func(conn *pgxpool.Conn) error {
		var err error
		v, err = scan(conn.QueryRow(ctx, sql, args...))
		return err
	})
	return v, err
}

// beginTx runs fn in a read-only transaction on a connection acquire gives
// (see read); fn may run twice.
func (p *connPool) beginTx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	return p.read(ctx, func(conn *pgxpool.Conn) error { return pgx.BeginTxFunc(ctx, conn, opts, fn) })
}

// read runs a read on a connection acquire gives. A pooled connection
// whose server crashed or failed over while it sat idle fails its next
// statement (the pool pings only those idle for over a second); that is
// not the database's answer, so a read that lost its connection runs once
// more on another. Reads only: running one twice is harmless.
func (p *connPool) read(ctx context.Context, fn func(*pgxpool.Conn) error) error {
	for attempt := 0; ; attempt++ {
		conn, err := p.acquire(ctx)
		if err != nil {
			return err
		}
		err = fn(conn)
		lost := err != nil && conn.Conn().IsClosed() && ctx.Err() == nil
		conn.Release() // a closed connection is destroyed, not pooled
		if !lost || attempt > 0 {
			return err
		}
	}
}
