package registry

import (
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestSnapshotsReflect: a change the watch drained while it sent its
// initial pages is dropped exactly when the page whose key range holds the
// object was read at the change's version or later.
func TestSnapshotsReflect(t *testing.T) {
	// Three pages: (-inf, (b, n2)] at 10, ((b, n2), (c, n5)] at 14, and
	// the final one, everything after (c, n5), at 20.
	pages := snapshots{
		{last: store.ListKey{"b", "n2"}, rv: 10},
		{last: store.ListKey{"c", "n5"}, rv: 14},
		{open: true, rv: 20},
	}
	for _, tc := range []struct {
		name string
		key  store.ListKey
		v    int64
		want bool
	}{
		{name: "updated after its page was read", key: store.ListKey{"a", "n1"}, v: 12, want: false},
		{name: "updated before its page was read", key: store.ListKey{"a", "n1"}, v: 9, want: true},
		{name: "version equal to its page's", key: store.ListKey{"b", "n1"}, v: 10, want: true},
		{name: "a page's last key belongs to it", key: store.ListKey{"b", "n2"}, v: 12, want: false},
		{name: "just after a page's last key: the next page", key: store.ListKey{"b", "n3"}, v: 12, want: true},
		{name: "created in a range read later, before it was read", key: store.ListKey{"c", "n0"}, v: 13, want: true},
		{name: "created in a range read later, after it was read", key: store.ListKey{"c", "n0"}, v: 15, want: false},
		{name: "deleted in a range read later, never sent", key: store.ListKey{"c", "n4"}, v: 14, want: true},
		{name: "the final page covers every later key", key: store.ListKey{"zz", "n9"}, v: 20, want: true},
		{name: "changed after the final page was read", key: store.ListKey{"zz", "n9"}, v: 21, want: false},
		{name: "before the first key", key: store.ListKey{"", ""}, v: 10, want: true},
		// Bytewise order of the columns, as COLLATE "C": "b" < "b-1" < "b1",
		// and upper case before lower case.
		{name: "a longer first column sorts after its prefix", key: store.ListKey{"b-1", "a"}, v: 13, want: true},
		{name: "upper case sorts first", key: store.ListKey{"B", "zz"}, v: 10, want: true},
		{name: "the second column compares bytewise, not as a number", key: store.ListKey{"c", "n10"}, v: 15, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pages.reflects(tc.key, tc.v); got != tc.want {
				t.Errorf("reflects(%q, %d) = %v, want %v", tc.key, tc.v, got, tc.want)
			}
		})
	}
}

// TestSnapshotsReflectOnePage: one final page reflects every change up to
// its version, whatever the key; no pages reflect nothing.
func TestSnapshotsReflectOnePage(t *testing.T) {
	one := snapshots{{open: true, rv: 7}}
	if !one.reflects(store.ListKey{"x", "y"}, 7) || one.reflects(store.ListKey{"x", "y"}, 8) {
		t.Errorf("one final page at 7: want changes up to 7 reflected, 8 not")
	}
	if (snapshots(nil)).reflects(store.ListKey{"x", "y"}, 1) {
		t.Errorf("no pages reflect a change")
	}
}
