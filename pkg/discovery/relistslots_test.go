package discovery

import (
	"context"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestRelistSlots(t *testing.T) {
	ctx := context.Background()
	if r := newRelistSlots(0, clocktesting.NewFakeClock(time.Now())); r != nil {
		t.Fatalf("newRelistSlots(0) = %v, want nil (no limit)", r)
	}
	var unlimited *relistSlots
	for range 100 {
		if _, ok := unlimited.acquire(ctx, false); !ok {
			t.Fatal("a nil relistSlots refused a slot")
		}
	}

	r := newRelistSlots(2, clocktesting.NewFakeClock(time.Now()))
	releaseA, okA := r.acquire(ctx, false)
	_, okB := r.acquire(ctx, false)
	if !okA || !okB {
		t.Fatal("the first two relists did not get their slots")
	}
	third := make(chan bool)
	go func() {
		_, ok := r.acquire(ctx, false)
		third <- ok
	}()
	select {
	case <-third:
		t.Fatal("a third relist ran while two held both slots")
	case <-time.After(100 * time.Millisecond):
	}
	releaseA()
	select {
	case ok := <-third:
		if !ok {
			t.Fatal("the third relist was refused after a slot was released")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the third relist still waits after a slot was released")
	}

	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan bool)
	go func() {
		_, ok := r.acquire(cctx, false)
		gaveUp <- ok
	}()
	cancel()
	select {
	case ok := <-gaveUp:
		if ok {
			t.Fatal("a relist whose context ended got a slot although none was free")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting relist did not give up when its context ended")
	}
}

// TestRelistSlotsFirst: a freed slot goes to a relist that goes first
// before any other still waiting, and a release called twice frees one
// slot.
func TestRelistSlotsFirst(t *testing.T) {
	ctx := context.Background()
	r := newRelistSlots(1, clocktesting.NewFakeClock(time.Now()))
	release, ok := r.acquire(ctx, false)
	if !ok {
		t.Fatal("no slot")
	}
	got := make(chan string, 3)
	wait := func(name string, first bool) {
		rel, ok := r.acquire(ctx, first)
		if !ok {
			got <- name + " refused"
			return
		}
		got <- name
		rel()
		rel() // frees the slot once
	}
	go wait("pods of member b", false)
	waitQueued(t, r, 0, 1)
	go wait("pods of member c", false)
	waitQueued(t, r, 0, 2)
	go wait("nodes of member a", true)
	waitQueued(t, r, 1, 2)
	release()
	var order []string
	for range 3 {
		select {
		case name := <-got:
			order = append(order, name)
		case <-time.After(10 * time.Second):
			t.Fatalf("relists still waiting; handed so far: %v", order)
		}
	}
	want := []string{"nodes of member a", "pods of member b", "pods of member c"}
	if !slices.Equal(order, want) {
		t.Errorf("slots handed in order %v, want %v", order, want)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.free != 1 {
		t.Errorf("%d slots free after every relist released twice, want 1", r.free)
	}
}

// waitQueued waits until first and others relists are waiting.
func waitQueued(t *testing.T, r *relistSlots, first, others int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		f, o := len(r.first), len(r.others)
		r.mu.Unlock()
		if f == first && o == others {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d first and %d other relists waiting, want %d and %d", f, o, first, others)
		}
		time.Sleep(time.Millisecond)
	}
}
