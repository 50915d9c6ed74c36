package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// SlowWatch is a watch whose client reads the response at a fixed rate
// over a connection of its own with a small receive buffer: a client on a
// slow link, or a controller that stalls between events. The server's
// writes block once the few buffers between them are full, as they would.
type SlowWatch struct {
	// Bytes and Events count what was read (an event is a line of the
	// JSON stream); Errors counts ERROR events.
	Bytes, Events, Errors atomic.Int64
	done                  chan struct{}
	err                   error
}

// ErrTooManyRequests is a watch the server answered 429: retry after a while.
var ErrTooManyRequests = errors.New("too many requests")

// slowReceiveBuffer is the socket receive buffer of a SlowWatch's
// connection (the kernel doubles it).
const slowReceiveBuffer = 4096

// StartSlowWatch sends GET path (a watch, e.g.
// /apis/platform.example.io/v1alpha1/nodecapacities?watch=1) with cfg's
// credentials over HTTP/1.1 and reads the stream at about bytesPerSecond
// until ctx ends or the server ends it. It returns once the response's
// headers arrived.
func StartSlowWatch(ctx context.Context, cfg *rest.Config, path string, bytesPerSecond int) (*SlowWatch, error) {
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
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		err := fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
		if resp.StatusCode == http.StatusTooManyRequests {
			err = fmt.Errorf("%w: %w", ErrTooManyRequests, err)
		}
		return nil, err
	}
	w := &SlowWatch{done: make(chan struct{})}
	go w.read(ctx, resp.Body, bytesPerSecond)
	return w, nil
}

// read reads body in tenths of a second's worth, ten times a second.
func (w *SlowWatch) read(ctx context.Context, body io.ReadCloser, bytesPerSecond int) {
	defer close(w.done)
	defer body.Close()
	stop := context.AfterFunc(ctx, func() { _ = body.Close() })
	defer stop()
	buf := make([]byte, max(1, bytesPerSecond/10))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	errorEvent := []byte(`"type":"ERROR"`)
	var line []byte // the current line's start, enough to spot an ERROR event
	for {
		n, err := io.ReadFull(body, buf)
		w.Bytes.Add(int64(n))
		for _, c := range buf[:n] {
			if c == '\n' {
				w.Events.Add(1)
				if bytes.Contains(line, errorEvent) {
					w.Errors.Add(1)
				}
				line = line[:0]
			} else if len(line) < 64 {
				line = append(line, c)
			}
		}
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				w.err = err
			}
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// Wait waits for the stream to end (ctx of StartSlowWatch ended, or the
// server closed it) and returns the read error, if any.
func (w *SlowWatch) Wait() error {
	<-w.done
	return w.err
}
