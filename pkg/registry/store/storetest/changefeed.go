package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// RunChangeFeedConformance checks an implementation of store.ChangeFeed
// against the contract its documentation states; newHarness returns a
// harness on a new, empty feed for each case.
func RunChangeFeedConformance(t *testing.T, newHarness func(t *testing.T) Harness) {
	cases := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"WritesAreChangesInOrder", testWritesAreChangesInOrder},
		{"Limits", testLimits},
		{"ReadPosition", testReadPosition},
		{"FilterByKindAndMember", testFilters},
		{"MemberFilterNeedsKind", testMemberFilterNeedsKind},
		{"Compaction", testCompaction},
		{"SnapshotReads", testSnapshotReads},
		{"Notifications", testNotifications},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newHarness(t))
		})
	}
}

// write is one commit of the suite's workload.
type write struct {
	kind          store.Kind
	cluster, name string
	del           bool
}

func (w write) do(t *testing.T, h Harness) {
	t.Helper()
	if w.del {
		h.Delete(t, w.kind, w.cluster, w.name)
	} else {
		h.Put(t, w.kind, w.cluster, w.name)
	}
}

// workload touches every kind in two members: adds, modifications,
// deletions and a re-add.
var workload = []write{
	{kind: store.KindNodeCapacity, cluster: "a", name: "n1"},
	{kind: store.KindNodeCapacity, cluster: "a", name: "n2"},
	{kind: store.KindClusterNamespace, cluster: "a", name: "x"},
	{kind: store.KindNodeCapacity, cluster: "b", name: "n1"},
	{kind: store.KindClusterCapacity, cluster: "a", name: "a"},
	{kind: store.KindNodeCapacity, cluster: "a", name: "n1"},
	{kind: store.KindClusterNamespace, cluster: "b", name: "y"},
	{kind: store.KindNodeCapacity, cluster: "a", name: "n2", del: true},
	{kind: store.KindClusterNamespace, cluster: "a", name: "x"},
	{kind: store.KindClusterCapacity, cluster: "b", name: "b"},
	{kind: store.KindClusterNamespace, cluster: "a", name: "x", del: true},
	{kind: store.KindClusterCapacity, cluster: "a", name: "a"},
	{kind: store.KindNodeCapacity, cluster: "a", name: "n2"},
}

// populate runs the workload and returns the whole history it made.
func populate(t *testing.T, h Harness) []store.Change {
	t.Helper()
	for _, w := range workload {
		w.do(t, h)
	}
	all, _ := everything(t, h.Feed(), store.ChangeFilter{}, 0)
	return all
}

// testWritesAreChangesInOrder: each write shows as a change of its object
// above every earlier one; the history is in strictly increasing version
// order and replays: an object is ADDED when absent (without a previous
// state), MODIFIED or DELETED when present (with the state it had), and
// every object, a deletion's too, is at its change's version.
func testWritesAreChangesInOrder(t *testing.T, h Harness) {
	feed := h.Feed()
	for _, w := range workload {
		before := present(t, feed)
		w.do(t, h)
		changes, readAt := everything(t, feed, store.ChangeFilter{}, before)
		i := slices.IndexFunc(changes, func(c store.Change) bool {
			return c.Kind == w.kind && c.ClusterID == w.cluster && objectOf(c).name == w.name
		})
		if i < 0 {
			t.Fatalf("%+v: no change of the object after %d: %q", w, before, describeAll(changes))
		}
		if got := changes[i].Type; (got == store.ChangeDeleted) != w.del {
			t.Errorf("%+v: change %s", w, describe(changes[i]))
		}
		if readAt < changes[len(changes)-1].ResourceVersion {
			t.Errorf("%+v: read at %d below the change it returned %s", w, readAt, describe(changes[len(changes)-1]))
		}
	}

	all, readAt := everything(t, feed, store.ChangeFilter{}, 0)
	state := map[string]int64{} // key → the version of its present state
	last := int64(0)
	for _, c := range all {
		if c.ResourceVersion <= last {
			t.Errorf("change %s after version %d", describe(c), last)
		}
		last = c.ResourceVersion
		o, k := objectOf(c), key(c)
		if o.rv != c.ResourceVersion {
			t.Errorf("change %s: object at version %d", describe(c), o.rv)
		}
		cur, exists := state[k]
		switch c.Type {
		case store.ChangeAdded:
			if exists || o.hasPrev {
				t.Errorf("change %s: existed before %v, previous state %v", describe(c), exists, o.hasPrev)
			}
		case store.ChangeModified, store.ChangeDeleted:
			if !exists || !o.hasPrev || o.prevName != o.name || o.prevRV != cur {
				t.Errorf("change %s: previous state %+v, want %s at %d", describe(c), o, k, cur)
			}
		default:
			t.Errorf("change %s: unknown type", describe(c))
		}
		if c.Type == store.ChangeDeleted {
			delete(state, k)
		} else {
			state[k] = c.ResourceVersion
		}
	}
	if readAt < last {
		t.Errorf("read at %d, below the last change %d", readAt, last)
	}
}

// testLimits: limit caps a read from its first change on, a read short of
// limit has returned everything up to its read position, limit <= 0
// returns no change, and paging by the last version returned walks the
// whole history.
func testLimits(t *testing.T, h Harness) {
	feed := h.Feed()
	all := populate(t, h)
	want := describeAll(all)
	for limit := 1; limit <= len(all)+1; limit++ {
		changes, _ := read(t, feed, store.ChangeFilter{}, 0, limit)
		if got := describeAll(changes); !slices.Equal(got, want[:min(limit, len(all))]) {
			t.Errorf("limit %d: %q, want %q", limit, got, want[:min(limit, len(all))])
		}
	}
	for _, limit := range []int{0, -1} {
		changes, readAt := read(t, feed, store.ChangeFilter{}, 0, limit)
		if len(changes) != 0 || readAt != present(t, feed) {
			t.Errorf("limit %d: %q read at %d; want none, read at the present %d", limit, describeAll(changes), readAt, present(t, feed))
		}
	}
	var paged []store.Change
	for after := int64(0); ; {
		changes, _ := read(t, feed, store.ChangeFilter{}, after, 2)
		paged = append(paged, changes...)
		if len(changes) < 2 {
			break
		}
		after = changes[len(changes)-1].ResourceVersion
	}
	if got := describeAll(paged); !slices.Equal(got, want) {
		t.Errorf("paging by 2: %q, want %q", got, want)
	}
}

// testReadPosition: a read is at the present, whatever it returns; a
// read from the present or beyond it returns nothing and is no error;
// and each write moves the present past its changes.
func testReadPosition(t *testing.T, h Harness) {
	feed := h.Feed()
	start := present(t, feed)
	all := populate(t, h)
	now := all[len(all)-1].ResourceVersion
	if start >= all[0].ResourceVersion {
		t.Errorf("the present before any write %d, the first change %d", start, all[0].ResourceVersion)
	}
	if _, readAt := read(t, feed, store.ChangeFilter{}, 0, 1); readAt < now {
		t.Errorf("a read of one change is at %d, below the last write %d", readAt, now)
	}
	for _, after := range []int64{now, now + 1, now + 1000} {
		if changes, readAt := read(t, feed, store.ChangeFilter{}, after, 10); len(changes) != 0 || readAt < now {
			t.Errorf("after %d: %q read at %d; want none, at %d or later", after, describeAll(changes), readAt, now)
		}
	}
	h.Put(t, store.KindNodeCapacity, "a", "n3")
	changes, readAt := everything(t, feed, store.ChangeFilter{}, now)
	if len(changes) == 0 || changes[0].ResourceVersion <= now || readAt < changes[len(changes)-1].ResourceVersion {
		t.Errorf("after a write: %q read at %d; want its changes after %d, at most the read position", describeAll(changes), readAt, now)
	}
}

// testFilters: a filtered read returns exactly the changes its filter
// matches, and only they count against limit.
func testFilters(t *testing.T, h Harness) {
	feed := h.Feed()
	all := populate(t, h)
	var filters []store.ChangeFilter
	for _, kind := range []store.Kind{store.KindNodeCapacity, store.KindClusterNamespace, store.KindClusterCapacity} {
		filters = append(filters, store.ChangeFilter{Kind: kind})
		for _, cluster := range []string{"a", "b", "absent"} {
			filters = append(filters, store.ChangeFilter{Kind: kind, ClusterID: cluster})
		}
	}
	// The follower's: the kinds it has watchers of.
	filters = append(filters,
		store.ChangeFilter{Kinds: []store.Kind{store.KindNodeCapacity, store.KindClusterCapacity}},
		store.ChangeFilter{Kinds: []store.Kind{store.KindClusterNamespace}},
		store.ChangeFilter{Kinds: []store.Kind{"Absent"}})
	for _, f := range filters {
		want := describeAll(matching(all, f))
		changes, _ := everything(t, feed, f, 0)
		if got := describeAll(changes); !slices.Equal(got, want) {
			t.Errorf("%+v: %q, want %q", f, got, want)
		}
		var paged []store.Change
		for after := int64(0); ; {
			changes, _ := read(t, feed, f, after, 1)
			if len(changes) == 0 {
				break
			}
			paged = append(paged, changes...)
			after = changes[0].ResourceVersion
		}
		if got := describeAll(paged); !slices.Equal(got, want) {
			t.Errorf("%+v paged by 1: %q, want %q", f, got, want)
		}
	}
}

// testMemberFilterNeedsKind: a filter on a member without a kind, or of a
// list of kinds beside a kind or a member, is refused. PostgreSQL refuses
// them (it reads the log by kind); the fake holds to the same, so no unit
// test relies on them.
func testMemberFilterNeedsKind(t *testing.T, h Harness) {
	populate(t, h)
	kinds := []store.Kind{store.KindNodeCapacity}
	for _, f := range []store.ChangeFilter{
		{ClusterID: "a"},
		{Kinds: kinds, ClusterID: "a"},
		{Kinds: kinds, Kind: store.KindClusterNamespace},
	} {
		if changes, _, err := h.Feed().Changes(t.Context(), f, 0, 10); err == nil {
			t.Errorf("%+v returned %q, want an error", f, describeAll(changes))
		} else if errors.Is(err, store.ErrCompacted) {
			t.Errorf("%+v: %v, not a compaction", f, err)
		}
	}
}
