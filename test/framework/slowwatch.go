package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// SlowWatch is a watch whose client reads the response at a fixed rate
// over a connection of its own with a small receive buffer: a client on a
// slow link, or a controller that stalls between events. The servers'
// writes block once the few buffers between them are full, as they would.
type SlowWatch struct {
	// Open is set once the server answered 200; Bytes counts what was
	// read, Added the ADDED events.
	Open  atomic.Bool
	Bytes atomic.Int64
	Added atomic.Int64

	done chan struct{}

	mu         sync.Mutex
	errorEvent string
	err        error
}

// ErrTooManyRequests is a watch the server answered 429: retry after a while.
var ErrTooManyRequests = errors.New("too many requests")

// slowReceiveBuffer is the socket receive buffer of a SlowWatch's
// connection (the kernel doubles it).
const slowReceiveBuffer = 4 << 10

// StartSlowWatch sends GET path (a watch, e.g.
// /apis/platform.example.io/v1alpha1/nodecapacities?watch=1) to the server
// cfg reaches, with its credentials, over HTTP/1.1, and reads the JSON
// event stream at about bytesPerSecond in the background until ctx ends or
// the stream does.
func StartSlowWatch(ctx context.Context, cfg *rest.Config, path string, bytesPerSecond int) *SlowWatch {
	w := &SlowWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		err := w.run(ctx, cfg, path, bytesPerSecond)
		if ctx.Err() != nil || errors.Is(err, io.EOF) {
			err = nil
		}
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}()
	return w
}

func (w *SlowWatch) run(ctx context.Context, cfg *rest.Config, path string, rate int) error {
	cfg = rest.CopyConfig(cfg)
	cfg.NextProtos = []string{"http/1.1"} // a connection per watch, no HTTP/2 sharing
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if tcp, ok := conn.(*net.TCPConn); ok {
			err = errors.Join(err, tcp.SetReadBuffer(slowReceiveBuffer))
		}
		return conn, err
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
		if resp.StatusCode == http.StatusTooManyRequests {
			err = fmt.Errorf("%w: %w", ErrTooManyRequests, err)
		}
		return err
	}
	w.Open.Store(true)
	dec := json.NewDecoder(&throttled{ctx: ctx, r: resp.Body, rate: rate, n: &w.Bytes})
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			return err
		}
		switch ev.Type {
		case "ADDED":
			w.Added.Add(1)
		case "ERROR":
			w.mu.Lock()
			w.errorEvent = string(ev.Object)
			w.mu.Unlock()
		}
	}
}

// Done is closed when the stream has ended.
func (w *SlowWatch) Done() <-chan struct{} { return w.done }

// Finished tells whether the stream has ended.
func (w *SlowWatch) Finished() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// ErrorEvent is the object of the last ERROR event, "" if none.
func (w *SlowWatch) ErrorEvent() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errorEvent
}

// Err is why the stream ended, once it has: nil when ctx ended or the
// server closed it cleanly.
func (w *SlowWatch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// throttled reads r at about rate bytes per second, at most a tenth of
// a second's worth at a time.
type throttled struct {
	ctx   context.Context //nolint:containedctx // the reader's lifetime
	r     io.Reader
	rate  int
	n     *atomic.Int64
	start time.Time
}

func (t *throttled) Read(p []byte) (int, error) {
	if t.start.IsZero() {
		t.start = time.Now()
	}
	// Wait until what was read so far is within the rate.
	due := t.start.Add(time.Duration(t.n.Load()) * time.Second / time.Duration(t.rate))
	select {
	case <-time.After(time.Until(due)):
	case <-t.ctx.Done():
		return 0, t.ctx.Err()
	}
	n, err := t.r.Read(p[:min(len(p), max(1, t.rate/10))])
	t.n.Add(int64(n))
	return n, err
}
