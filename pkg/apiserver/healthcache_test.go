package apiserver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheckCache(t *testing.T) {
	var runs atomic.Int32
	release := make(chan struct{})
	hung := errors.New("hung")
	now := time.Unix(0, 0)
	c := &checkCache{ttl: time.Second, timeout: 50 * time.Millisecond, now: func() time.Time { return now },
		check: func(ctx context.Context) error {
			runs.Add(1)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return hung
			}
		}}

	// Concurrent callers share one run; a run that does not answer ends at
	// the timeout, for every caller.
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() { errs[i] = c.result(t.Context()) })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, hung) {
			t.Fatalf("caller %d: %v, want the timed-out run's error", i, err)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("20 concurrent callers ran the check %d times, want 1", n)
	}

	// Within the TTL the result is cached; after it, a new run answers.
	if err := c.result(t.Context()); !errors.Is(err, hung) || runs.Load() != 1 {
		t.Fatalf("within the TTL: %v after %d runs, want the cached error after 1", err, runs.Load())
	}
	close(release)
	now = now.Add(time.Second)
	if err := c.result(t.Context()); err != nil || runs.Load() != 2 {
		t.Fatalf("after the TTL: %v after %d runs, want nil after 2", err, runs.Load())
	}

	// A caller whose request ends first gets its own context's error.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	now = now.Add(time.Second)
	block := make(chan struct{})
	c.check = func(context.Context) error { <-block; return nil }
	if err := c.result(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled caller: %v, want context.Canceled", err)
	}
	close(block)
}
