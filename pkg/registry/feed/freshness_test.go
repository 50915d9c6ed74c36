package feed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/platform-apiserver/pkg/registry/feed/feedtest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// hangingFeed is a feed whose reads, while hung, wait until their context
// ends: a database that stopped answering without closing its connections.
type hangingFeed struct {
	*feedtest.MemFeed
	hung atomic.Bool
}

func (h *hangingFeed) Changes(ctx context.Context, filter store.ChangeFilter, after int64, limit int) ([]store.Change, int64, error) {
	if h.hung.Load() {
		<-ctx.Done()
		return nil, 0, ctx.Err()
	}
	return h.MemFeed.Changes(ctx, filter, after, limit)
}

// A read that hangs is abandoned at the read timeout, the follower's
// freshness check fails saying since when, and once the feed answers again
// the follower delivers what was written meanwhile and is fresh again.
func TestHungFeedFailsFreshnessAndRecovers(t *testing.T) {
	ctx := t.Context()
	h := &hangingFeed{MemFeed: feedtest.New()}
	f := New(h, Options{PollInterval: 10 * time.Millisecond, ReadTimeout: 50 * time.Millisecond})
	const maxAge = 300 * time.Millisecond
	if err := f.CheckFresh(maxAge); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("before Run: CheckFresh = %v, want an error saying the follower is not running", err)
	}
	go f.Run(ctx)
	if err := f.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.CheckFresh(maxAge); err != nil {
		t.Fatalf("healthy follower: CheckFresh = %v", err)
	}
	s := mustSubscribe(t, f, store.KindNodeCapacity)

	h.hung.Store(true)
	var stale error
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		stale = f.CheckFresh(maxAge)
		return stale != nil, nil
	}); err != nil {
		t.Fatalf("a hung feed never failed CheckFresh: %v", err)
	}
	for _, want := range []string{"last read the registry", "limit 300ms", "--watch-feed-read-timeout"} {
		if !strings.Contains(stale.Error(), want) {
			t.Errorf("CheckFresh = %q, want it to say %q", stale, want)
		}
	}
	h.AddN("c", store.KindNodeCapacity, 3) // written while the database hung

	h.hung.Store(false)
	receive(t, s, 3)
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return f.CheckFresh(maxAge) == nil, nil
	}); err != nil {
		t.Fatalf("CheckFresh never recovered: %v", f.CheckFresh(maxAge))
	}
}

// countingFeed counts the reads running at once and holds each until
// released.
type countingFeed struct {
	*feedtest.MemFeed
	running, most atomic.Int32
	queries       atomic.Int64
	release       chan struct{}
}

func (c *countingFeed) Changes(ctx context.Context, filter store.ChangeFilter, after int64, limit int) ([]store.Change, int64, error) {
	n := c.running.Add(1)
	defer c.running.Add(-1)
	for {
		m := c.most.Load()
		if n <= m || c.most.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-c.release:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	c.queries.Add(1)
	return c.MemFeed.Changes(ctx, filter, after, limit)
}

// Resumes of different filters run at most HistoryReads queries at once;
// the others wait for a turn and are answered too.
func TestHistoryReadsAreBounded(t *testing.T) {
	c := &countingFeed{MemFeed: feedtest.New(), release: make(chan struct{})}
	c.AddN("c", store.KindNodeCapacity, 50)
	f := New(c, Options{HistoryReads: 3})
	errs := make(chan error, 40)
	for i := range 40 {
		go func() {
			_, _, err := f.History(t.Context(), store.ChangeFilter{Kind: store.KindNodeCapacity, ClusterID: fmt.Sprint("c", i)}, int64(i))
			errs <- err
		}()
	}
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.running.Load() == 3, nil
	}); err != nil {
		t.Fatalf("history reads running: %d, want 3", c.running.Load())
	}
	close(c.release)
	for range 40 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if m := c.most.Load(); m != 3 {
		t.Errorf("at most %d history reads ran at once, want 3", m)
	}
}

// Resumes of one filter at many positions share queries: each is answered
// with exactly the matching changes after its position, and the queries
// are far fewer than the resumes.
func TestHistoryReadsShareRanges(t *testing.T) {
	c := &countingFeed{MemFeed: feedtest.New(), release: make(chan struct{})}
	c.AddN("c1", store.KindNodeCapacity, 100)
	c.AddN("c2", store.KindNodeCapacity, 100)
	c.AddN("c1", store.KindClusterNamespace, 100)
	f := New(c, Options{HistoryReads: 2})
	filter := store.ChangeFilter{Kind: store.KindNodeCapacity, ClusterID: "c1"}
	type got struct {
		after   int64
		changes []store.Change
		reach   int64
		err     error
	}
	results := make(chan got, 200)
	for i := range 200 {
		go func() {
			changes, reach, err := f.History(t.Context(), filter, int64(i))
			results <- got{int64(i), changes, reach, err}
		}()
	}
	// Let every resume queue behind the first query before it runs.
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		f.history.mu.Lock()
		defer f.history.mu.Unlock()
		return len(f.history.queues[keyOf(filter)]) == 200, nil
	}); err != nil {
		t.Fatal("the resumes did not queue")
	}
	close(c.release)
	all, present, _ := c.MemFeed.Changes(t.Context(), filter, 0, 1000)
	for range 200 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		var want []int64
		for _, ch := range all {
			if ch.ResourceVersion > r.after {
				want = append(want, ch.ResourceVersion)
			}
		}
		var have []int64
		for _, ch := range r.changes {
			have = append(have, ch.ResourceVersion)
		}
		if !slices.Equal(have, want) || r.reach != present {
			t.Errorf("resume after %d: changes %v reaching %d, want %v reaching %d", r.after, have, r.reach, want, present)
		}
	}
	if q := c.queries.Load(); q > 2 {
		t.Errorf("200 resumes of one filter made %d queries, want 1 (or 2 if one came late)", q)
	}
}
