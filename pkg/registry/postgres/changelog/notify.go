package changelog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/backoff"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// sqlListen LISTENs on the channel registry_state's trigger notifies on
// each commit that published a new registry version (migration 002).
var sqlListen = statement("notify_listen")

// listenerAppName marks the listening session in pg_stat_activity.
const listenerAppName = "platform-apiserver-listen"

// errListenUnsupported: the server rejected LISTEN (some Postgres-compatible
// engines lack it).
var errListenUnsupported = errors.New("LISTEN not supported")

// Listener listens for the commits that publish a new registry version
// (Notifications) and, when a read finds the server hung, replaces the
// primary's connections and its own (Abandon).
type Listener struct {
	// feed is the pool whose settings a listening connection takes.
	feed *pgdb.Pool
	// primary are the primary's pools: reset when the listening
	// connection drops, cut when a read finds the server hung.
	primary []*pgdb.Pool
	// saw is told the registry version each notification names.
	saw func(rv int64)

	abandonedAt atomic.Int64 // Unix nanoseconds of the last Abandon past the interval
	abandoned   atomic.Bool
	cancelWait  atomic.Pointer[context.CancelFunc]
}

// NewListener returns a listener on the primary, whose pools are primary
// (feed among them), that tells saw each version a notification names.
func NewListener(feed *pgdb.Pool, primary []*pgdb.Pool, saw func(rv int64)) *Listener {
	return &Listener{feed: feed, primary: primary, saw: saw}
}

// Notifications delivers a value soon after each commit that changed the
// registry, coalesced in a channel of capacity 1. Each call holds one
// dedicated connection outside the pool (call it once and fan out). LISTEN
// is in place when it returns, so a commit after the call is not missed;
// after the connection drops it reconnects with backoff and then delivers a
// value, since commits in between went unnoticed. If the server rejects
// LISTEN the channel never fires and callers rely on polling. The channel
// closes when ctx ends; the error is ctx's if it already has.
func (l *Listener) Notifications(ctx context.Context) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	out := make(chan struct{}, 1)
	conn, err := l.listen(ctx)
	switch {
	case errors.Is(err, errListenUnsupported):
		logger.Info("Registry database rejects LISTEN; change-feed readers poll", "err", err)
		go func() {
			<-ctx.Done()
			close(out)
		}()
		return out, nil
	case err != nil:
		logger.Error(err, "Cannot listen for registry changes yet; retrying in the background")
	}
	go l.forwardNotifications(ctx, conn, out)
	return out, nil
}

// forwardNotifications relays notifications from conn (nil: not connected
// yet) to out until ctx ends, reconnecting with backoff.
func (l *Listener) forwardNotifications(ctx context.Context, conn *pgx.Conn, out chan struct{}) {
	defer close(out)
	logger := klog.FromContext(ctx)
	retry := listenBackoff()
	for {
		if conn == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry.Step()):
			}
			var err error
			if conn, err = l.listen(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				if errors.Is(err, errListenUnsupported) {
					logger.Info("Registry database rejects LISTEN; change-feed readers poll", "err", err)
					<-ctx.Done()
					return
				}
				logger.V(2).Info("Reconnecting to listen for registry changes failed; retrying", "err", err)
				continue
			}
			retry = listenBackoff()
			signal(out) // commits while disconnected went unnoticed
		}
		n, err := l.waitForNotification(ctx, conn)
		if err != nil {
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
			conn = nil
			if ctx.Err() != nil {
				return
			}
			logger.Error(err, "Lost the registry notification connection; reconnecting")
			// Most likely the server restarted or failed over: drop the
			// pool's idle connections too, so requests do not draw dead ones
			// (each would fail its first statement).
			l.resetPools()
			continue
		}
		if rv, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			l.saw(rv) // the follower's next read needs it
		}
		signal(out)
	}
}

// How the listener tells a quiet server from a hung one: after
// listenCheckInterval without a notification it pings, and a ping without
// an answer within listenPingTimeout drops the connection. A server that
// stops answering without closing its sockets (a paused host, SIGSTOP) would
// otherwise hold the listener, and the follower's wake-ups, for good.
const (
	listenCheckInterval = 10 * time.Second
	listenPingTimeout   = 5 * time.Second
)

// abandonInterval is the least time between two Abandon calls that probe.
const abandonInterval = 30 * time.Second

// errAbandoned: a read found the server unresponsive (Abandon).
var errAbandoned = errors.New("a registry read found the database unresponsive; reconnecting")

// waitForNotification waits for the next notification on conn, pinging the
// server whenever it has been quiet for listenCheckInterval.
func (l *Listener) waitForNotification(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	for {
		if l.abandoned.Swap(false) {
			return nil, errAbandoned
		}
		wctx, cancel := context.WithTimeout(ctx, listenCheckInterval)
		l.cancelWait.Store(&cancel)
		n, err := conn.WaitForNotification(wctx)
		l.cancelWait.Store(nil)
		cancel()
		switch {
		case err == nil:
			return n, nil
		case ctx.Err() != nil:
			return nil, err
		case l.abandoned.Load():
			continue // returns errAbandoned at the top
		case !errors.Is(wctx.Err(), context.DeadlineExceeded):
			return nil, err
		}
		pctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
		err = conn.Ping(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("the registry database did not answer a ping within %s: %w", listenPingTimeout, err)
		}
	}
}

// Abandon is called when a read ran out of time: the server
// may have hung or been failed over from while keeping its sockets open,
// so the pools' connections and the listener's are replaced by new ones, to
// whichever server the DSN reaches now. Connections in use are cut too: a
// list or a discovery commit waiting on the hung server fails now (a read
// runs once more on a new connection) instead of at its deadline.
func (l *Listener) Abandon(ctx context.Context) {
	// Once per abandonInterval: the reads that time out next are most
	// likely still connecting (to the first host of a multi-host DSN,
	// hung too); a reset then would close the good connections being made.
	now := time.Now().UnixNano()
	last := l.abandonedAt.Load()
	if now-last < int64(abandonInterval) || !l.abandonedAt.CompareAndSwap(last, now) {
		return
	}
	if l.primaryAnswers(context.WithoutCancel(ctx)) {
		// Slow, not hung: what waits on it waits for a reason (a lock, a
		// long query); cutting would fail discovery's commits in flight.
		return
	}
	for _, p := range l.primary {
		p.CutAll()
	}
	l.abandoned.Store(true)
	if cancel := l.cancelWait.Load(); cancel != nil {
		(*cancel)()
	}
}

// probeTimeout bounds primaryAnswers' connection and query.
const probeTimeout = 2 * time.Second

// primaryAnswers reports whether the server the primary's pools are
// connected to answers a new connection's query within probeTimeout. A
// new connection that reaches another server (a multi-host DSN after a
// failover) does not count: the pools' connections are on the old one.
func (l *Listener) primaryAnswers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cfg := l.feed.Config().ConnConfig.Copy()
	cfg.ConnectTimeout = probeTimeout
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		return false
	}
	probed := conn.PgConn().Conn().RemoteAddr().String()
	for _, p := range l.primary {
		for addr := range p.Servers() {
			if addr != probed {
				return false
			}
		}
	}
	klog.FromContext(ctx).V(2).Info("A registry read ran out of time, but the primary answers: not cutting its connections", "server", probed)
	return true
}

// resetPools closes the idle connections of the primary's pools, and
// those in use once they are returned.
func (l *Listener) resetPools() {
	for _, p := range l.primary {
		p.Reset()
	}
}

// listen opens a dedicated connection with the pool's settings (and the
// DSN file's current credentials) and LISTENs.
func (l *Listener) listen(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := l.feed.ConnConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to listen: %w", err)
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = listenerAppName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to listen: %w", pgdb.InterpretError(err))
	}
	if _, err := conn.Exec(ctx, sqlListen); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		var pgErr *pgconn.PgError
		if ierr := pgdb.InterpretError(err); errors.As(err, &pgErr) && !errors.Is(ierr, store.ErrUnavailable) {
			return nil, fmt.Errorf("%w: %w", errListenUnsupported, err)
		}
		return nil, fmt.Errorf("listen: %w", pgdb.InterpretError(err))
	}
	return conn, nil
}

func listenBackoff() wait.Backoff {
	return backoff.New(100 * time.Millisecond)
}

// signal makes a value pending on out unless one already is.
func signal(out chan struct{}) {
	select {
	case out <- struct{}{}:
	default:
	}
}
