package discovery

import (
	"context"
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
		if _, ok := unlimited.acquire(ctx); !ok {
			t.Fatal("a nil relistSlots refused a slot")
		}
	}

	r := newRelistSlots(2, clocktesting.NewFakeClock(time.Now()))
	releaseA, okA := r.acquire(ctx)
	_, okB := r.acquire(ctx)
	if !okA || !okB {
		t.Fatal("the first two relists did not get their slots")
	}
	third := make(chan bool)
	go func() {
		_, ok := r.acquire(ctx)
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
		_, ok := r.acquire(cctx)
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
