package registry

import (
	"context"
	"errors"
	"sort"
	"sync"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/example/platform-apiserver/pkg/registry/feed"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// initialPageSize is how many objects of a watch's initial state are read
// (in one short transaction) and held at a time: a slow client costs its
// watch two pages of memory, and a page of a few hundred kilobytes
// reaches even a slow client within seconds.
const initialPageSize = 100

// initialPumpLimit bounds the changes a watch holds while it sends its
// initial state (items share the follower's changes: a few dozen bytes
// each of its own).
const initialPumpLimit = 50000

// ObjectPage is a page of a watch's initial state (a store.StreamPage of
// API objects), with the list key of its last object.
type ObjectPage struct {
	Objects         []runtime.Object
	ResourceVersion int64
	Final           bool
	// Last is the key of the last object (unset on an empty page, which
	// only the final page can be).
	Last store.ListKey
}

// initialPage is a page of a watch's initial state, or the error that
// ended reading it.
type initialPage struct {
	ObjectPage
	err error
}

// errWatchEnded stops reading the initial state of a watch that ended.
var errWatchEnded = errors.New("watch ended")

// streamInitial reads the initial state in keyset pages, each in a short
// transaction of its own, and hands them to the watch over a channel, as
// fast as the watch sends them: one page ahead at most, and no transaction
// or connection held while the client reads. It returns once the first
// page is read, with the error that keeps the watch from starting (the
// read failed, or its snapshot is older than the requested
// resourceVersion), so that is the request's answer rather than an event;
// a later failure arrives as a page with err set.
func (w *watcher) streamInitial(ctx context.Context, opts store.ListOptions, options *metainternalversion.ListOptions) (<-chan initialPage, error) {
	// The subscription delivers every change after its From: the first
	// snapshot must not be older, or changes in between would be missed.
	opts.Freshness.AtLeast = max(opts.Freshness.AtLeast, w.sub.From)
	pages := make(chan initialPage)
	first := make(chan error, 1)
	go func() {
		defer close(pages)
		answered := false
		err := w.spec.Stream(ctx, opts, initialPageSize, func(pg ObjectPage) error {
			if !answered {
				if err := CheckListResourceVersion(options, pg.ResourceVersion); err != nil {
					return err
				}
				answered = true
				first <- nil
			}
			select {
			case pages <- initialPage{ObjectPage: pg}:
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

// snapshot is one initial page as the watch remembers it: the key range
// it covers, (previous page's last key, last] or, when open, everything
// after the previous page, and the version it was read at.
type snapshot struct {
	last store.ListKey
	open bool
	rv   int64
}

// snapshots are a watch's initial pages in key order (so in version
// order too).
type snapshots []snapshot

// reflects reports whether the initial pages already show the change to
// the object at key made at version v: the page whose range holds key
// was read at v or later. Such a change is not sent again; nor is a
// DELETED of an object the pages never sent, for the same reason.
func (s snapshots) reflects(key store.ListKey, v int64) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i].open || key.Compare(s[i].last) <= 0 })
	return i < len(s) && v <= s[i].rv
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
// building each object with toObject and the key of each page's last
// record with key.
func StreamObjects[R, O any, P APIObject[O]](stream func(context.Context, store.ListOptions, int, func(store.StreamPage[R]) error) error,
	key func(*R) store.ListKey, toObject func(*R) O) func(context.Context, store.ListOptions, int, func(ObjectPage) error) error {
	return func(ctx context.Context, opts store.ListOptions, pageSize int, yield func(ObjectPage) error) error {
		return stream(ctx, opts, pageSize, func(page store.StreamPage[R]) error {
			out := ObjectPage{Objects: make([]runtime.Object, len(page.Items)), ResourceVersion: page.ResourceVersion, Final: page.Final}
			for i := range page.Items {
				obj := toObject(&page.Items[i])
				out.Objects[i] = P(&obj)
			}
			if n := len(page.Items); n > 0 {
				out.Last = key(&page.Items[n-1])
			}
			return yield(out)
		})
	}
}
