package framework

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Relay relays TCP connections from a loopback address to target until
// stopped, when it closes its listener and every connection (an API behind
// it is gone: connections are refused, as by a stopped API server).
// Restart listens on the same address again (the API is back). Tests put
// one between a client and a server to take the server away from that
// client alone.
type Relay struct {
	target  string
	address string
	mu      sync.Mutex
	l       net.Listener // nil while stopped
	conns   []net.Conn
	// hangUp: accept each connection and close it at once, as a proxy or
	// load balancer in front of a stopped API server does (DropConnections).
	hangUp bool
}

// StartRelay relays a new loopback port to target (host:port).
func StartRelay(target string) (*Relay, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Relay{target: target, address: l.Addr().String()}
	r.serve(l)
	return r, nil
}

// Addr is the relay's host:port.
func (r *Relay) Addr() string { return r.address }

// serve relays the connections l accepts until l is closed.
func (r *Relay) serve(l net.Listener) {
	r.mu.Lock()
	r.l = l
	r.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			hangUp := r.hangUp
			r.mu.Unlock()
			if hangUp {
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", r.target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			if r.l != l { // stopped meanwhile
				r.mu.Unlock()
				c.Close()
				u.Close()
				continue
			}
			r.conns = append(r.conns, c, u)
			r.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
}

// DropConnections closes every relayed connection and, until Resume,
// accepts each new one and closes it at once: the address answers, the
// API behind it does not.
func (r *Relay) DropConnections() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hangUp = true
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// Resume relays new connections again after DropConnections.
func (r *Relay) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hangUp = false
}

// Stop closes the listener and every relayed connection.
func (r *Relay) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.l != nil {
		r.l.Close()
		r.l = nil
	}
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// Restart listens on the relay's address again after Stop. The port was
// free a moment ago; another socket taking it meanwhile is an error.
func (r *Relay) Restart(ctx context.Context) error {
	var l net.Listener
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var err error
		l, err = net.Listen("tcp", r.address)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("relay: listen on %s again: %w", r.address, err)
	}
	r.serve(l)
	return nil
}
