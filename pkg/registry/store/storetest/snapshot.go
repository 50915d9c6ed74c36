package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// testSnapshotReads: reads concurrent with writes each see one snapshot:
// every change its filter matches up to its read position (to limit), and
// no later one; a reader's positions never go back.
func testSnapshotReads(t *testing.T, h Harness) {
	feed := h.Feed()
	type reader struct {
		filter store.ChangeFilter
		limit  int
	}
	type sample struct {
		changes []store.Change
		readAt  int64
	}
	readers := []reader{
		{store.ChangeFilter{}, 1 << 20},
		{store.ChangeFilter{}, 3},
		{store.ChangeFilter{Kind: store.KindNodeCapacity, ClusterID: "a"}, 1 << 20},
	}
	done := make(chan struct{})
	results := make([]chan []sample, len(readers))
	for i, r := range readers {
		results[i] = make(chan []sample, 1)
		go func() {
			var out []sample
			defer func() { results[i] <- out }()
			for {
				select {
				case <-done:
					return
				default:
				}
				changes, readAt, err := feed.Changes(t.Context(), r.filter, 0, r.limit)
				if err != nil {
					t.Errorf("Changes(%+v): %v", r.filter, err)
					return
				}
				out = append(out, sample{changes, readAt})
			}
		}()
	}
	for i := range 20 {
		h.Put(t, store.KindNodeCapacity, "a", fmt.Sprint("n", i%3))
		h.Put(t, store.KindClusterNamespace, "b", fmt.Sprint("x", i%2))
		h.Put(t, store.KindNodeCapacity, "b", "n1")
	}
	close(done)

	all, _ := everything(t, feed, store.ChangeFilter{}, 0)
	for i, r := range readers {
		samples := <-results[i]
		last := int64(0)
		for _, s := range samples {
			want := within(matching(all, r.filter), 0, s.readAt)
			want = want[:min(len(want), r.limit)]
			if got, want := describeAll(s.changes), describeAll(want); !slices.Equal(got, want) {
				t.Errorf("%+v limit %d read at %d: %q, want %q", r.filter, r.limit, s.readAt, got, want)
			}
			if s.readAt < last {
				t.Errorf("%+v: read at %d after a read at %d", r.filter, s.readAt, last)
			}
			last = s.readAt
		}
		t.Logf("%+v limit %d: %d reads", r.filter, r.limit, len(samples))
	}
}
