package feed

import (
	"context"
	"slices"
	"sync"
)

// fairTurns hands out at most n turns at once, fairly among users: when a
// turn frees, it goes to the user after the last one served, round-robin
// over the users waiting, each user's waiters in order. So one user with
// many history reads waiting (watches resuming with many filters) takes one
// turn in each round, not all of them.
type fairTurns struct {
	n       int // turns in all
	mu      sync.Mutex
	free    int
	waiting map[string][]chan struct{} // by user, in arrival order
	users   []string                   // the users waiting, in round-robin order
}

func newFairTurns(n int) *fairTurns {
	return &fairTurns{n: n, free: n, waiting: map[string][]chan struct{}{}}
}

// acquire waits for a turn for user until ctx ends.
func (f *fairTurns) acquire(ctx context.Context, user string) error {
	f.mu.Lock()
	if f.free > 0 && len(f.users) == 0 {
		f.free--
		f.mu.Unlock()
		return nil
	}
	granted := make(chan struct{})
	if _, ok := f.waiting[user]; !ok {
		f.users = append(f.users, user)
	}
	f.waiting[user] = append(f.waiting[user], granted)
	f.mu.Unlock()

	select {
	case <-granted:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		select {
		case <-granted: // granted meanwhile: give it back
			f.releaseLocked()
		default:
			f.remove(user, granted)
		}
		return ctx.Err()
	}
}

// release gives a turn back.
func (f *fairTurns) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseLocked()
}

// releaseLocked hands the freed turn to the next user waiting, if any.
func (f *fairTurns) releaseLocked() {
	if len(f.users) == 0 {
		f.free++
		return
	}
	user := f.users[0]
	queue := f.waiting[user]
	close(queue[0])
	f.users = f.users[1:]
	if len(queue) > 1 {
		f.waiting[user] = queue[1:]
		f.users = append(f.users, user) // to the end of the round
	} else {
		delete(f.waiting, user)
	}
}

// remove drops a waiter that gave up.
func (f *fairTurns) remove(user string, granted chan struct{}) {
	queue := slices.DeleteFunc(f.waiting[user], func(c chan struct{}) bool { return c == granted })
	if len(queue) > 0 {
		f.waiting[user] = queue
		return
	}
	delete(f.waiting, user)
	f.users = slices.DeleteFunc(f.users, func(u string) bool { return u == user })
}
