package feedtest

import (
	"context"
	"sync"
)

// notifier fans commits out to the channels of Notifications calls.
type notifier struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// subscribe returns a channel of capacity 1, signalled by each signal and
// closed when ctx ends.
func (n *notifier) subscribe(ctx context.Context) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs == nil {
		n.subs = map[chan struct{}]struct{}{}
	}
	n.subs[ch] = struct{}{}
	n.mu.Unlock()
	go func() {
		<-ctx.Done()
		n.mu.Lock()
		delete(n.subs, ch)
		n.mu.Unlock()
		close(ch)
	}()
	return ch, nil
}

// signal makes a value pending on every channel unless one already is.
func (n *notifier) signal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
