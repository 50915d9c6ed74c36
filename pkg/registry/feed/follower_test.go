package feed

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/feed/feedtest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func startFollower(t *testing.T, m *feedtest.MemFeed, buffer int) *Follower {
	t.Helper()
	f := New(m, Options{PollInterval: 10 * time.Millisecond, BatchSize: 7, SubscriberBuffer: buffer})
	go f.Run(t.Context())
	if err := f.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	return f
}

func mustSubscribe(t *testing.T, f *Follower, kind store.Kind) *Subscription {
	t.Helper()
	s, err := f.Subscribe(kind, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// receive reads items until a change with rv want arrives.
func receive(t *testing.T, s *Subscription, want int64) []int64 {
	t.Helper()
	var got []int64
	timeout := time.After(10 * time.Second)
	for {
		select {
		case it, ok := <-s.C:
			if !ok {
				t.Fatalf("subscription closed after %v", got)
			}
			if it.Change != nil {
				got = append(got, it.ResourceVersion)
				if it.ResourceVersion == want {
					return got
				}
			}
		case <-timeout:
			t.Fatalf("timed out waiting for rv %d; got %v", want, got)
		}
	}
}

func TestSubscribersGetEveryChangeInOrder(t *testing.T) {
	m := feedtest.New()
	m.AddN("c", store.KindNodeCapacity, 3) // history before the follower starts
	f := startFollower(t, m, 100)
	a, b := mustSubscribe(t, f, store.KindNodeCapacity), mustSubscribe(t, f, store.KindNodeCapacity)
	other := mustSubscribe(t, f, store.KindClusterNamespace)
	if a.From != 3 {
		t.Fatalf("subscription starts at %d, want the registry's present 3", a.From)
	}
	m.AddN("c", store.KindNodeCapacity, 20) // more than one batch of 7
	for _, s := range []*Subscription{a, b} {
		got := receive(t, s, 23)
		for i, rv := range got {
			if rv != int64(4+i) {
				t.Fatalf("got %v, want 4..23 in order", got)
			}
		}
	}
	select {
	case it := <-other.C:
		if it.Change != nil {
			t.Errorf("ClusterNamespace subscriber got a NodeCapacity change %d", it.ResourceVersion)
		}
	default:
	}
}

func TestLaggingSubscriberIsDroppedOthersContinue(t *testing.T) {
	// Rounds of 8 changes arrive as two batches (7+1), so a subscriber that
	// reads every round holds at most 8 changes and 2 progress marks, within
	// the buffer of 12; one that never reads overflows in round two.
	m := feedtest.New()
	f := startFollower(t, m, 12)
	slow, fast := mustSubscribe(t, f, store.KindNodeCapacity), mustSubscribe(t, f, store.KindNodeCapacity)
	for round := int64(1); round <= 3; round++ {
		m.AddN("c", store.KindNodeCapacity, 8)
		if got := receive(t, fast, 8*round); len(got) != 8 {
			t.Fatalf("round %d: fast subscriber got %v, want 8 changes", round, got)
		}
	}
	for range slow.C { // what it buffered, then closed
	}
	if !slow.Dropped() {
		t.Error("slow subscriber was closed but not marked dropped")
	}
}

func TestCompactionPastFollowerDropsSubscribers(t *testing.T) {
	m := feedtest.New()
	f := New(m, Options{PollInterval: time.Hour, BatchSize: 7, SubscriberBuffer: 100})
	if err := f.catchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := mustSubscribe(t, f, store.KindNodeCapacity)
	m.AddN("c", store.KindNodeCapacity, 5)
	if _, err := m.Compact(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	m.CompactTo(5) // compacted past the follower, which is still at 0
	if err := f.catchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.C; ok {
		// drain progress items, the channel must end closed
		for range s.C {
		}
	}
	if f.resourceVersion() != 5 {
		t.Errorf("follower restarted at %d, want the present 5", f.resourceVersion())
	}
}

func TestBurstLargerThanBufferKeepsReadingSubscriber(t *testing.T) {
	m := feedtest.New()
	f := New(m, Options{PollInterval: 10 * time.Millisecond, BatchSize: 1000, SubscriberBuffer: 10})
	go f.Run(t.Context())
	if err := f.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := mustSubscribe(t, f, store.KindNodeCapacity)
	done := make(chan []int64)
	go func() { done <- receive(t, s, 3000) }()
	m.AddN("c", store.KindNodeCapacity, 3000) // one dispatch of 1000s, 100x the buffer
	if got := <-done; len(got) != 3000 {
		t.Errorf("got %d changes, want 3000", len(got))
	}
	if s.Dropped() {
		t.Error("a subscriber that kept reading was dropped during a burst")
	}
}

// TestResumeWithinWindow: a subscriber asking for changes after a version
// the window still holds gets them as its backlog, with no history read;
// one asking further back gets no backlog.
func TestResumeWithinWindow(t *testing.T) {
	m := feedtest.New()
	m.AddN("c", store.KindNodeCapacity, 3) // before the follower starts: loaded into the window
	f := New(m, Options{PollInterval: 10 * time.Millisecond, BatchSize: 7, SubscriberBuffer: 100, WindowChanges: 10})
	go f.Run(t.Context())
	if err := f.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	sub := mustSubscribe(t, f, store.KindNodeCapacity)
	m.AddN("c", store.KindNodeCapacity, 4)
	receive(t, sub, 7)
	sub.Close()
	readsBefore := m.HistoryReads()

	s, err := f.Subscribe(store.KindNodeCapacity, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := itemVersions(s.Backlog); fmt.Sprint(got) != "[2 3 4 5 6 7]" || s.From != 7 {
		t.Errorf("backlog %v from %d; want 2..7 from 7", got, s.From)
	}
	s.Close()
	if reads := m.HistoryReads(); reads != readsBefore {
		t.Errorf("a resume within the window read history %d times", reads-readsBefore)
	}

	sub = mustSubscribe(t, f, store.KindNodeCapacity)
	m.AddN("c", store.KindNodeCapacity, 10) // the window holds 8..17 now
	receive(t, sub, 17)
	old, err := f.Subscribe(store.KindNodeCapacity, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if old.Backlog != nil {
		t.Errorf("resume from 3 got a backlog %v; the window starts after 7", itemVersions(old.Backlog))
	}
}

// TestRouteSkipsChangesBeforeDelivery: a subscriber's route is applied to
// live changes and the backlog alike.
func TestRouteSkipsChangesBeforeDelivery(t *testing.T) {
	m := feedtest.New()
	f := startFollower(t, m, 100)
	onlyA := func(c *store.Change) bool { return c.ClusterID == "a" }
	s, err := f.Subscribe(store.KindNodeCapacity, -1, onlyA)
	if err != nil {
		t.Fatal(err)
	}
	m.AddN("b", store.KindNodeCapacity, 5)
	m.AddN("a", store.KindNodeCapacity, 1) // rv 6
	if got := receive(t, s, 6); fmt.Sprint(got) != "[6]" {
		t.Errorf("routed subscriber got %v, want only 6", got)
	}
	back, err := f.Subscribe(store.KindNodeCapacity, 0, onlyA)
	if err != nil {
		t.Fatal(err)
	}
	var wanted []Item
	for _, it := range back.Backlog {
		if back.Wants(it.Change) {
			wanted = append(wanted, it)
		}
	}
	if got := itemVersions(wanted); fmt.Sprint(got) != "[6]" {
		t.Errorf("routed backlog %v, want [6]", got)
	}
}

// TestNoGapWhenCompactionOvertakesTheFollower races subscribers against a
// follower that compaction keeps overtaking: every subscription either
// fails with ErrNotSynced or receives every change after its From, in
// order, until it is closed — never a silent gap.
func TestNoGapWhenCompactionOvertakesTheFollower(t *testing.T) {
	m := feedtest.New()
	f := New(m, Options{PollInterval: time.Millisecond, BatchSize: 5, SubscriberBuffer: 10000, WindowChanges: 4})
	go f.Run(t.Context())
	if err := f.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m.AddN("c", store.KindNodeCapacity, 3)
			if i%5 == 0 { // compact everything, often past the follower
				m.CompactTo(m.ResourceVersion())
			}
			time.Sleep(200 * time.Microsecond) // spacing the writes on purpose
		}
	})
	subscribed, notSynced := 0, 0
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		s, err := f.Subscribe(store.KindNodeCapacity, -1, nil)
		if errors.Is(err, ErrNotSynced) {
			notSynced++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		subscribed++
		next := s.From + 1
		timeout := time.After(50 * time.Millisecond)
	read:
		for {
			select {
			case it, ok := <-s.C:
				if !ok {
					break read
				}
				if it.Change == nil {
					continue
				}
				if it.ResourceVersion != next {
					t.Fatalf("subscription from %d: got %d, want %d (a gap)", s.From, it.ResourceVersion, next)
				}
				next++
			case <-timeout:
				s.Close()
				break read
			}
		}
	}
	close(stop)
	writer.Wait()
	if subscribed == 0 {
		t.Fatal("no subscription succeeded")
	}
	t.Logf("%d subscriptions checked, %d refused while the follower resynced", subscribed, notSynced)
}

func itemVersions(items []Item) []int64 {
	out := []int64{}
	for _, it := range items {
		out = append(out, it.ResourceVersion)
	}
	return out
}
