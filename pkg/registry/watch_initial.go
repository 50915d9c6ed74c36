package registry

import (
	"context"
	"errors"
	"sync"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/example/platform-apiserver/pkg/registry/feed"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// initialPageSize is how many objects of a watch's initial state are read
// and held at a time.
const initialPageSize = 500

// initialPumpLimit bounds the changes a watch holds while it sends its
// initial state (items share the follower's changes: a few dozen bytes
// each of its own).
const initialPumpLimit = 50000

// initialPage is a page of a watch's initial state, or the error that
// ended reading it.
type initialPage struct {
	rv   int64
	objs []runtime.Object
	err  error
}

// errWatchEnded stops reading the initial state of a watch that ended.
var errWatchEnded = errors.New("watch ended")

// streamInitial reads the initial state in pages from one snapshot and
// hands them to the watch over a channel, as fast as the watch sends them.
// It returns once the first page is read, with the error that keeps the
// watch from starting (the read failed, or its snapshot is older than the
// requested resourceVersion), so that is the request's answer rather than
// an event; a later failure arrives as a page with err set.
func (w *watcher) streamInitial(ctx context.Context, opts store.ListOptions, options *metainternalversion.ListOptions) (<-chan initialPage, error) {
	pages := make(chan initialPage)
	first := make(chan error, 1)
	go func() {
		defer close(pages)
		answered := false
		err := w.spec.Stream(ctx, opts, initialPageSize, func(rv int64, objs []runtime.Object) error {
			if !answered {
				if err := CheckListResourceVersion(options, rv); err != nil {
					return err
				}
				answered = true
				first <- nil
			}
			select {
			case pages <- initialPage{rv: rv, objs: objs}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case <-w.done:
				return errWatchEnded
			}
		})
		switch {
		case !answered:
			first <- err
		case err != nil && !errors.Is(err, errWatchEnded) && ctx.Err() == nil:
			select {
			case pages <- initialPage{err: err}:
			case <-w.done:
			}
		}
	}()
	if err := <-first; err != nil {
		return nil, err
	}
	return pages, nil
}

// pump drains a subscription into memory while the watch sends its
// initial state, so the follower never waits for (or drops) a watch
// because its client is still reading the initial events. It holds at
// most max items; beyond that it stops reading, and the follower drops the
// subscription as it would a slow watcher's.
type pump struct {
	quit chan struct{}
	done chan struct{}

	mu     sync.Mutex
	items  []feed.Item
	closed bool
}

func startPump(c <-chan feed.Item, max int) *pump {
	p := &pump{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			p.mu.Lock()
			full := len(p.items) >= max
			p.mu.Unlock()
			if full {
				<-p.quit
				return
			}
			select {
			case it, ok := <-c:
				p.mu.Lock()
				if !ok {
					p.closed = true
					p.mu.Unlock()
					return
				}
				p.items = append(p.items, it)
				p.mu.Unlock()
			case <-p.quit:
				return
			}
		}
	}()
	return p
}

// stop ends the pump and returns what it drained, and whether the
// subscription was closed meanwhile.
func (p *pump) stop() (items []feed.Item, closed bool) {
	close(p.quit)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.items, p.closed
}

// StreamObjects adapts a store stream of records R to WatchSpec.Stream,
// building each object with toObject.
func StreamObjects[R, O any, P APIObject[O]](stream func(context.Context, store.ListOptions, int, func(int64, []R) error) error, toObject func(*R) O) func(context.Context, store.ListOptions, int, func(int64, []runtime.Object) error) error {
	return func(ctx context.Context, opts store.ListOptions, pageSize int, yield func(int64, []runtime.Object) error) error {
		return stream(ctx, opts, pageSize, func(rv int64, page []R) error {
			objs := make([]runtime.Object, len(page))
			for i := range page {
				obj := toObject(&page[i])
				objs[i] = P(&obj)
			}
			return yield(rv, objs)
		})
	}
}
