package feed

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/example/platform-apiserver/pkg/registry/feed/feedtest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// The turns go round the users waiting: a user with many waiters gets one
// turn a round, one with a single waiter is served within a round.
func TestFairTurnsGoRound(t *testing.T) {
	f := newFairTurns(2)
	ctx := t.Context()
	for range 2 {
		if err := f.acquire(ctx, "noisy"); err != nil {
			t.Fatal(err)
		}
	}
	order := make(chan string, 10)
	start := func(user string) {
		go func() {
			if err := f.acquire(ctx, user); err == nil {
				order <- user
			}
		}()
	}
	for range 5 {
		start("noisy")
	}
	waitWaiting(t, f, "noisy", 5)
	start("quiet")
	waitWaiting(t, f, "quiet", 1)
	f.release() // to noisy, the first to wait; noisy goes to the end of the round
	if got := <-order; got != "noisy" {
		t.Fatalf("first turn to %s, want noisy (waiting first)", got)
	}
	f.release()
	if got := <-order; got != "quiet" {
		t.Fatalf("second turn to %s, want quiet: one turn a round for noisy", got)
	}
}

// A waiter that gives up leaves the round; a turn granted as it gave up
// is given back, not lost.
func TestFairTurnsGiveUp(t *testing.T) {
	f := newFairTurns(1)
	if err := f.acquire(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := f.acquire(ctx, "b"); err == nil {
		t.Fatal("acquired a turn none was free for")
	}
	f.mu.Lock()
	if len(f.users) != 0 || len(f.waiting) != 0 {
		t.Errorf("a waiter that gave up is still waiting: %v %v", f.users, f.waiting)
	}
	f.mu.Unlock()
	f.release()
	for range 3 { // the one turn is still there, again and again
		if err := f.acquire(t.Context(), "c"); err != nil {
			t.Fatal(err)
		}
		f.release()
	}
}

func waitWaiting(t *testing.T, f *fairTurns, user string, n int) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.waiting[user]) == n, nil
	}); err != nil {
		t.Fatalf("%s has not %d waiting", user, n)
	}
}

// A tenant resuming watches with 30 filters (say, cluster labels the
// registry does not hold) does not make another user's resume wait for
// all of them: the other's history read runs within a round of turns.
func TestHistoryTurnsSharedByUser(t *testing.T) {
	c := &countingFeed{MemFeed: feedtest.New(), release: make(chan struct{})}
	c.AddN("c", store.KindNodeCapacity, 10)
	f := New(c, Options{HistoryReads: 2})
	as := func(name string) context.Context {
		return request.WithUser(t.Context(), &user.DefaultInfo{Name: name})
	}
	tenant := make(chan error, 30)
	for i := range 30 {
		go func() {
			_, _, err := f.History(as("tenant"), store.ChangeFilter{Kind: store.KindNodeCapacity, ClusterID: fmt.Sprint("absent-", i)}, 0)
			tenant <- err
		}()
	}
	waitWaiting(t, f.history.turns, "tenant", 28) // 2 running, 28 waiting
	other := make(chan error, 1)
	go func() {
		_, _, err := f.History(as("other"), store.ChangeFilter{Kind: store.KindNodeCapacity, ClusterID: "c"}, 0)
		other <- err
	}()
	waitWaiting(t, f.history.turns, "other", 1)
	for released := 1; ; released++ {
		c.release <- struct{}{}
		select {
		case err := <-other:
			if err != nil {
				t.Fatal(err)
			}
			if released > 4 {
				t.Errorf("the other user's read ran after %d of the tenant's, want at most 3", released-1)
			}
			close(c.release)
			for range 30 {
				if err := <-tenant; err != nil {
					t.Fatal(err)
				}
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
