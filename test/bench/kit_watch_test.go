package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
)

const (
	// watchersPerClient watches share one client-go transport. k8s.io/apiserver
	// lets a client open 100 HTTP/2 streams per connection unless
	// --http2-max-streams-per-connection says otherwise, and kube-apiserver
	// keeps that default.
	watchersPerClient = 100
	// openWorkers bounds how many watches are being opened at once.
	openWorkers = 50
	// watchRequestTimeout is the timeoutSeconds of every watch, far beyond
	// any benchmark, so the server never ends one mid-run.
	watchRequestTimeout = int64(30 * 60)
)

// watchGroup is the benchmark's watchers: goroutines reading watches over
// transports of their own until close.
type watchGroup struct {
	ctx        context.Context //nolint:containedctx // the watchers' lifetime, ended by close
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	mu         sync.Mutex
	transports []http.RoundTripper
}

func newWatchGroup(ctx context.Context) *watchGroup {
	g := &watchGroup{}
	g.ctx, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return g
}

// client returns a JSON clientset for cfg with a transport, and so HTTP/2
// connections, of its own: a config with a Proxy func is one client-go's
// transport cache cannot share. The Proxy func also keeps the watches off
// any proxy the environment names; wrap, when set, wraps the transport.
func (g *watchGroup) client(cfg *rest.Config, wrap func(http.RoundTripper) http.RoundTripper) (versioned.Interface, error) {
	cfg = jsonConfig(cfg)
	cfg.Timeout = 0 // an http.Client timeout would cut the watch
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("watch client transport: %w", err)
	}
	c, err := versioned.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("watch client: %w", err)
	}
	g.mu.Lock()
	g.transports = append(g.transports, hc.Transport)
	g.mu.Unlock()
	return c, nil
}

// clients returns a client (client's, wrap's) for every watchersPerClient
// of n watchers.
func (g *watchGroup) clients(cfg func() *rest.Config, n int, wrap func(http.RoundTripper) http.RoundTripper) ([]versioned.Interface, error) {
	var out []versioned.Interface
	for range (n + watchersPerClient - 1) / watchersPerClient {
		c, err := g.client(cfg(), wrap)
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// latestRV lists NodeCapacities through c for the resourceVersion to watch
// from, as a string and a number.
func latestRV(ctx context.Context, c versioned.Interface) (string, int64, error) {
	list, err := c.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return "", 0, fmt.Errorf("list NodeCapacities for a resourceVersion: %w", err)
	}
	rv, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("list resourceVersion %q: %w", list.ResourceVersion, err)
	}
	return list.ResourceVersion, rv, nil
}

// goWatch runs f in the group until close.
func (g *watchGroup) goWatch(f func(context.Context)) { g.wg.Go(func() { f(g.ctx) }) }

// close ends every watch, waits for the readers and closes the connections.
func (g *watchGroup) close() {
	g.cancel()
	g.wg.Wait()
	for _, rt := range g.transports {
		utilnet.CloseIdleConnectionsFor(rt)
	}
}

// closeWatches closes g and waits until the platform-apiserver serves none
// of its NodeCapacity watches.
func (e *env) closeWatches(ctx context.Context, g *watchGroup) error {
	g.close()
	err := pollUntil(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		err := e.expectWatches(ctx, 0)
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		return fmt.Errorf("platform-apiserver still serves NodeCapacity watches after they were closed: %w", err)
	}
	return nil
}

// follower reads the watches open opens. Each event (bookmarks included)
// goes to event with its arrival; each ending (a refused open, an error
// event, the stream closing) goes to ended. Either returns false to stop;
// ended returning true resumes, as a reflector does: from the last
// resourceVersion seen, or from the present after a 410.
type follower struct {
	open  func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	event func(ev watch.Event, at time.Time) bool
	ended func(err error) bool
}

// follow reads from resourceVersion rv until ctx ends or a callback stops it.
func (f follower) follow(ctx context.Context, rv string) {
	for ctx.Err() == nil {
		w, err := f.open(ctx, metav1.ListOptions{
			ResourceVersion:     rv,
			AllowWatchBookmarks: true, // as reflectors and informers ask
			TimeoutSeconds:      new(watchRequestTimeout),
		})
		if err != nil {
			if ctx.Err() != nil || !f.ended(fmt.Errorf("open from %q: %w", rv, err)) {
				return
			}
			if expired(err) {
				rv = ""
			}
			if sleepCtx(ctx, 100*time.Millisecond) != nil { // a reflector's backoff, shortened
				return
			}
			continue
		}
		var stop bool
		rv, stop, err = f.read(w, rv)
		w.Stop()
		if stop || ctx.Err() != nil || !f.ended(err) {
			return
		}
	}
}

// read passes one stream's events on and returns the version to resume
// from, why the stream ended, and whether event asked to stop.
func (f follower) read(w watch.Interface, rv string) (string, bool, error) {
	for ev := range w.ResultChan() {
		at := time.Now()
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			if expired(err) {
				return "", false, fmt.Errorf("watch error after %s: %w", rv, err) // "" starts at the present
			}
			return rv, false, fmt.Errorf("watch error after %s: %w", rv, err)
		}
		if m, err := meta.Accessor(ev.Object); err == nil {
			rv = m.GetResourceVersion()
		}
		if !f.event(ev, at) {
			return rv, true, nil
		}
	}
	return rv, false, fmt.Errorf("watch ended after %s", rv)
}

// expired tells a 410: the version to resume from is gone.
func expired(err error) bool { return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) }

// deliver sends v on c unless ctx ends first; it reports whether it did.
func deliver[T any](ctx context.Context, c chan<- T, v T) bool {
	select {
	case c <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

// receive hands what arrives on c to take until take is done or fails;
// after timeout it returns late's error.
func receive[T any](ctx context.Context, c <-chan T, timeout time.Duration, take func(T) (bool, error), late func() error) error {
	deadline := time.After(timeout)
	for {
		select {
		case v := <-c:
			if done, err := take(v); done || err != nil {
				return err
			}
		case <-deadline:
			return late()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// expectNothing returns describe's error for the first value waiting on c,
// if any.
func expectNothing[T any](c <-chan T, describe func(T) error) error {
	select {
	case v := <-c:
		return describe(v)
	default:
		return nil
	}
}

// pollUntil polls cond every interval until it is done, up to timeout; the
// error then says what cond last reported.
func pollUntil(ctx context.Context, interval, timeout time.Duration, cond func(context.Context) (done bool, state string, err error)) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		done, state, err := cond(ctx)
		last = state
		return done, err
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return nil
}
