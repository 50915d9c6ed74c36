package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// testCompaction: Compact drops the changes committed before its time
// and returns the new horizon, the last version it dropped; a read from
// below the horizon fails with ErrCompacted, a read from it or above
// returns every later change; the horizon never goes down; compacting
// everything leaves the present resumable.
func testCompaction(t *testing.T, h Harness) {
	feed, ctx := h.Feed(), t.Context()
	h.Put(t, store.KindNodeCapacity, "a", "n1")
	h.Put(t, store.KindClusterNamespace, "a", "x")
	old := present(t, feed)
	if horizon, err := feed.Compact(ctx, time.Now().Add(-time.Hour)); err != nil || horizon != 0 {
		t.Fatalf("Compact(before every change) = %d, %v; want horizon 0", horizon, err)
	}
	// Time passing on purpose: the cut falls between the writes before and
	// after it, whatever the clock's resolution.
	time.Sleep(20 * time.Millisecond)
	cut := time.Now()
	time.Sleep(20 * time.Millisecond)
	h.Put(t, store.KindNodeCapacity, "b", "n1")
	h.Delete(t, store.KindNodeCapacity, "a", "n1")
	all, now := everything(t, feed, store.ChangeFilter{}, 0)

	horizon, err := feed.Compact(ctx, cut)
	if err != nil || horizon != old {
		t.Fatalf("Compact(cut) = %d, %v; want the last version before the cut %d", horizon, err, old)
	}
	compacted := func(filter store.ChangeFilter, after int64) {
		t.Helper()
		if changes, _, err := feed.Changes(ctx, filter, after, 10); !errors.Is(err, store.ErrCompacted) {
			t.Errorf("Changes(%+v, after %d) below the horizon %d = %q, %v; want ErrCompacted", filter, after, horizon, describeAll(changes), err)
		}
	}
	compacted(store.ChangeFilter{}, horizon-1)
	compacted(store.ChangeFilter{}, 0)
	compacted(store.ChangeFilter{Kind: store.KindNodeCapacity, ClusterID: "b"}, 0)
	changes, readAt := everything(t, feed, store.ChangeFilter{}, horizon)
	if got, want := describeAll(changes), describeAll(within(all, horizon, now)); !slices.Equal(got, want) || readAt != now {
		t.Errorf("Changes at the horizon = %q read at %d, want %q at %d", got, readAt, want, now)
	}
	if again, err := feed.Compact(ctx, time.Now().Add(-time.Hour)); err != nil || again != horizon {
		t.Errorf("Compact(before the horizon) = %d, %v; want the horizon %d kept", again, err, horizon)
	}

	if horizon, err = feed.Compact(ctx, time.Now().Add(time.Hour)); err != nil || horizon != now {
		t.Fatalf("Compact(everything) = %d, %v; want the present %d", horizon, err, now)
	}
	compacted(store.ChangeFilter{}, now-1)
	if changes, readAt := everything(t, feed, store.ChangeFilter{}, now); len(changes) != 0 || readAt != now {
		t.Errorf("Changes at the present after compacting everything = %q at %d, want none at %d", describeAll(changes), readAt, now)
	}
	h.Put(t, store.KindNodeCapacity, "b", "n1")
	if changes, _ := everything(t, feed, store.ChangeFilter{Kind: store.KindNodeCapacity}, now); len(changes) != 1 || changes[0].Type != store.ChangeModified {
		t.Errorf("Changes after a write following full compaction = %q, want b/n1 MODIFIED", describeAll(changes))
	}
}
