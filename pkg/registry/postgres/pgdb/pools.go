package pgdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// busyRetryAfter is the Retry-After of a request refused for want of a
// connection: slow readers hold connections for seconds, not minutes.
const busyRetryAfter = 1

// Pool is one of the store's pools of connections, named for metrics and
// errors: pgxpool's, with an acquire timeout that answers store.ErrBusy
// and connections that can be cut at once (CutAll).
type Pool struct {
	*pgxpool.Pool
	name string
	// acquireTimeout bounds the wait for a connection; 0: the context's.
	acquireTimeout time.Duration
	// busy counts acquires refused after acquireTimeout.
	busy atomic.Int64
	// conns are the pool's connections, to cut in use or not (cutAll).
	conns connSet
}

// NewPool creates a pool of size connections (0: cfg's own size) whose
// acquires for reads (GetRow, ReadTx) wait at most acquireTimeout (0: as
// long as the context allows).
func NewPool(ctx context.Context, name string, cfg *pgxpool.Config, size int32, acquireTimeout time.Duration) (*Pool, error) {
	cfg = cfg.Copy()
	if size > 0 {
		cfg.MaxConns = size
	}
	cfg.MinConns = min(cfg.MinConns, cfg.MaxConns)
	cp := &Pool{name: name, acquireTimeout: acquireTimeout}
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
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set {
		// pg_stat_activity tells the pools' sessions apart.
		cfg.ConnConfig.RuntimeParams["application_name"] = "platform-apiserver-" + strings.Fields(name)[0]
	}
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create postgres %s pool: %w", name, InterpretError(err))
	}
	cp.Pool = p
	return cp, nil
}

// Name is the pool's name in metrics and errors.
func (p *Pool) Name() string { return p.name }

// Busy counts the acquires refused after the acquire timeout.
func (p *Pool) Busy() int64 { return p.busy.Load() }

// Spare keeps conn from being cut (CutAll) until the returned function is
// called: a migration's, which may hold locks that keep a change-feed read
// waiting past its timeout on a healthy server.
func (p *Pool) Spare(conn *pgconn.PgConn) (done func()) { return p.conns.spare(conn) }

// Servers returns the addresses of the servers the pool's open
// connections are on.
func (p *Pool) Servers() map[string]bool { return p.conns.servers() }

// CutAll closes every connection of the pool, idle or in use: a statement
// waiting on an unresponsive server fails now instead of at its deadline,
// and the pool makes new connections, to whichever server the DSN reaches
// now. (pgxpool's Reset closes connections in use only once returned.)
func (p *Pool) CutAll() {
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
func (p *Pool) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	if st := p.Stat(); p.acquireTimeout <= 0 || st.AcquiredConns() < st.MaxConns() {
		// A connection is idle or may be made: making one takes what
		// connecting takes (after a failover that left the old primary's
		// sockets open, its connect timeout first), not the wait for a
		// busy pool.
		conn, err := p.Acquire(ctx)
		return conn, InterpretError(err)
	}
	actx, cancel := context.WithTimeout(ctx, p.acquireTimeout)
	defer cancel()
	conn, err := p.Acquire(actx)
	if err == nil || ctx.Err() != nil || !errors.Is(actx.Err(), context.DeadlineExceeded) {
		return conn, InterpretError(err)
	}
	if st := p.Stat(); st.AcquiredConns() >= st.MaxConns() {
		p.busy.Add(1)
		return nil, &store.BusyError{RetryAfterSeconds: busyRetryAfter,
			Message: fmt.Sprintf("all %d registry connections for %s are in use: no connection was free within %s", st.MaxConns(), p.name, p.acquireTimeout)}
	}
	return nil, fmt.Errorf("%w: no connection to the registry database within %s: %w", store.ErrUnavailable, p.acquireTimeout, err)
}

// GetRow runs a one-row query on a connection p.acquire gives and scans
// the row with scan (see read for a connection that died idle).
func GetRow[T any](ctx context.Context, p *Pool, scan func(pgx.Row) (T, error), sql string, args ...any) (T, error) {
	var v T
	err := p.read(ctx, func(conn *pgxpool.Conn) error {
		var err error
		v, err = scan(conn.QueryRow(ctx, sql, args...))
		return err
	})
	return v, err
}

// ReadTx runs fn in a read-only transaction on a connection acquire gives
// (see read); fn may run twice.
func (p *Pool) ReadTx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	return p.read(ctx, func(conn *pgxpool.Conn) error { return pgx.BeginTxFunc(ctx, conn, opts, fn) })
}

// read runs a read on a connection acquire gives. A pooled connection
// whose server crashed or failed over while it sat idle fails its next
// statement (the pool pings only those idle for over a second); that is
// not the database's answer, so a read that lost its connection runs once
// more on another. Reads only: running one twice is harmless.
func (p *Pool) read(ctx context.Context, fn func(*pgxpool.Conn) error) error {
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
