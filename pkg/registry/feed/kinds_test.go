package feed

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/feed/feedtest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// syncedFollower is a follower driven by hand (catchUp), synced at the
// feed's present.
func syncedFollower(t *testing.T, feed store.ChangeFeed, opts Options) *Follower {
	t.Helper()
	opts.PollInterval, opts.BatchSize, opts.SubscriberBuffer = time.Hour, 7, 100
	f := New(feed, opts)
	mustCatchUp(t, f)
	return f
}

func mustCatchUp(t *testing.T, f *Follower) {
	t.Helper()
	if err := f.catchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// drained is the versions of the changes a subscription holds now.
func drained(s *Subscription) []int64 {
	var got []int64
	for {
		select {
		case it := <-s.C:
			if it.Change != nil {
				got = append(got, it.ResourceVersion)
			}
		default:
			return got
		}
	}
}

// A follower reads the changes of the kinds it has watchers of and no
// others: with none it only learns where the feed is, and a kind it did
// not read is not served from its window.
func TestFollowerReadsOnlyWatchedKinds(t *testing.T) {
	m := feedtest.New()
	f := syncedFollower(t, m, Options{})
	m.AddN("c", store.KindNodeCapacity, 20)
	mustCatchUp(t, f)
	if rv, read := f.resourceVersion(), m.Returned(); rv != 20 || read != 0 {
		t.Fatalf("no watchers: follower at %d having read %d changes, want at 20 having read none", rv, read)
	}

	ns := mustSubscribe(t, f, store.KindClusterNamespace)
	m.AddN("c", store.KindNodeCapacity, 5)     // 21..25
	m.AddN("c", store.KindClusterNamespace, 3) // 26..28
	mustCatchUp(t, f)
	if got := drained(ns); !slices.Equal(got, []int64{26, 27, 28}) {
		t.Errorf("ClusterNamespace watcher got %v, want 26..28", got)
	}
	if read := m.Returned(); read != 3 {
		t.Errorf("the follower read %d changes, want the 3 ClusterNamespaces only", read)
	}

	// NodeCapacity was not read: a resume from before now reads the feed.
	if s, err := f.Subscribe(store.KindNodeCapacity, 22, nil); err != nil || s.Backlog != nil || s.From != 28 {
		t.Errorf("NodeCapacity resume from 22: backlog %v, from %d, err %v; want none from the window, from 28", s.Backlog, s.From, err)
	}
	// ClusterNamespace was, since 20: a resume from then is served from memory.
	if s, err := f.Subscribe(store.KindClusterNamespace, 20, nil); err != nil || len(s.Backlog) != 3 {
		t.Errorf("ClusterNamespace resume from 20: backlog %v, err %v; want the 3 changes from the window", s.Backlog, err)
	}
}

// A kind is read on for KindLinger after its last watcher leaves, so a
// watcher coming back resumes from memory, and not after.
func TestFollowerStopsReadingAKindItsWatchersLeft(t *testing.T) {
	m := feedtest.New()
	now := time.Unix(1000, 0)
	f := syncedFollower(t, m, Options{KindLinger: time.Minute, Now: func() time.Time { return now }})
	s := mustSubscribe(t, f, store.KindNodeCapacity)
	m.AddN("c", store.KindNodeCapacity, 2)
	mustCatchUp(t, f)
	s.Close()

	now = now.Add(59 * time.Second)
	m.AddN("c", store.KindNodeCapacity, 2) // 3, 4
	mustCatchUp(t, f)
	if read := m.Returned(); read != 4 {
		t.Fatalf("within the linger: read %d changes, want 4", read)
	}
	if back, err := f.Subscribe(store.KindNodeCapacity, 2, nil); err != nil || len(back.Backlog) != 2 {
		t.Fatalf("a watcher back within the linger: backlog %v, err %v; want 3 and 4 from memory", back.Backlog, err)
	} else {
		back.Close()
	}

	now = now.Add(61 * time.Second)
	m.AddN("c", store.KindNodeCapacity, 2) // 5, 6
	mustCatchUp(t, f)
	if rv, read := f.resourceVersion(), m.Returned(); rv != 6 || read != 4 {
		t.Errorf("after the linger: follower at %d having read %d changes, want at 6 having read 4", rv, read)
	}
	if late, err := f.Subscribe(store.KindNodeCapacity, 4, nil); err != nil || late.Backlog != nil || late.From != 6 {
		t.Errorf("a watcher back after the linger: backlog %v, from %d, err %v; want none from the window, from 6", late.Backlog, late.From, err)
	}
}

// pausedFeed holds a read's answer, once it has one, until released: a
// read in flight while the test acts.
type pausedFeed struct {
	*feedtest.MemFeed
	pause   atomic.Bool
	read    chan struct{}
	release chan struct{}
}

func (p *pausedFeed) Changes(ctx context.Context, filter store.ChangeFilter, after int64, limit int) ([]store.Change, int64, error) {
	changes, readAt, err := p.MemFeed.Changes(ctx, filter, after, limit)
	if p.pause.Swap(false) {
		p.read <- struct{}{}
		<-p.release
	}
	return changes, readAt, err
}

// A watcher of a kind the follower is not reading, subscribing while a
// read without that kind is in flight, misses none of the kind's changes:
// the read is not used to move past them.
func TestSubscribingDuringAReadWithoutTheKindMissesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other bool // the read in flight is of another kind's changes, not only the present
	}{{"no kind read", false}, {"another kind read", true}} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pausedFeed{MemFeed: feedtest.New(), read: make(chan struct{}), release: make(chan struct{})}
			f := syncedFollower(t, p, Options{})
			want := []int64{1, 2}
			if tc.other {
				// The other kind's changes come between this kind's: the
				// read's must not move the follower past 1.
				mustSubscribe(t, f, store.KindClusterNamespace)
				p.AddN("c", store.KindNodeCapacity, 1)     // 1
				p.AddN("c", store.KindClusterNamespace, 2) // 2, 3
				want = []int64{1, 4, 5}
			}
			p.AddN("c", store.KindNodeCapacity, 2)
			p.pause.Store(true)
			done := make(chan error, 1)
			go func() { done <- f.catchUp(t.Context()) }()
			<-p.read // it has read, and not yet dispatched
			s := mustSubscribe(t, f, store.KindNodeCapacity)
			close(p.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			mustCatchUp(t, f)
			if got := drained(s); s.From != 0 || !slices.Equal(got, want) {
				t.Errorf("subscribed from %d, got %v; want from 0 and %v", s.From, got, want)
			}
		})
	}
}
