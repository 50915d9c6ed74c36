package feed

import (
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

func startFollower(t *testing.T, m *memFeed, buffer int) *Follower {
	t.Helper()
	f := New(m, Options{PollInterval: 10 * time.Millisecond, BatchSize: 7, SubscriberBuffer: buffer})
	go f.Run(t.Context())
	if err := f.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	return f
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
	m := newMemFeed()
	m.add(store.KindNodeCapacity, 3) // history before the follower starts
	f := startFollower(t, m, 100)
	a, b := f.Subscribe(store.KindNodeCapacity), f.Subscribe(store.KindNodeCapacity)
	other := f.Subscribe(store.KindClusterNamespace)
	if a.From != 3 {
		t.Fatalf("subscription starts at %d, want the registry's present 3", a.From)
	}
	m.add(store.KindNodeCapacity, 20) // more than one batch of 7
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
	m := newMemFeed()
	f := startFollower(t, m, 12)
	slow, fast := f.Subscribe(store.KindNodeCapacity), f.Subscribe(store.KindNodeCapacity)
	for round := int64(1); round <= 3; round++ {
		m.add(store.KindNodeCapacity, 8)
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
	m := newMemFeed()
	f := New(m, Options{PollInterval: time.Hour, BatchSize: 7, SubscriberBuffer: 100})
	if err := f.catchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := f.Subscribe(store.KindNodeCapacity)
	m.add(store.KindNodeCapacity, 5)
	if _, err := m.Compact(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.horizon = 5 // compacted past the follower, which is still at 0
	m.mu.Unlock()
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
	m := newMemFeed()
	f := New(m, Options{PollInterval: 10 * time.Millisecond, BatchSize: 1000, SubscriberBuffer: 10})
	go f.Run(t.Context())
	if err := f.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := f.Subscribe(store.KindNodeCapacity)
	done := make(chan []int64)
	go func() { done <- receive(t, s, 3000) }()
	m.add(store.KindNodeCapacity, 3000) // one dispatch of 1000s, 100x the buffer
	if got := <-done; len(got) != 3000 {
		t.Errorf("got %d changes, want 3000", len(got))
	}
	if s.Dropped() {
		t.Error("a subscriber that kept reading was dropped during a burst")
	}
}
