package nodecapacity_test

import (
	"fmt"
	"slices"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/registry/feed"
)

// TestInitialPagesEachAtTheirVersion: the initial state is read page by
// page (100 objects), each page as the registry is when it is read. While
// the client reads the first page, a node of that page changes (the change
// follows the initial events), and in the last page, not read yet, one node
// changes and one goes (its page shows them: no event of their own). The
// initial-events-end bookmark comes after every change up to the last
// page's version.
func TestInitialPagesEachAtTheirVersion(t *testing.T) {
	s := newStack(t, feed.Options{}, 0)
	for i := range 250 {
		s.mem.Put(nc("c", fmt.Sprintf("n%03d", i), map[string]string{"team": "a"}))
	}
	w := s.watch(t, metainternalversion.ListOptions{SendInitialEvents: new(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})

	first := next(t, w, 1, false)
	// The watch is sending its first page (the second is read ahead): the
	// third, n200..n249, is read after these.
	sent := s.mem.Put(nc("c", "n005", map[string]string{"team": "b"}))
	unread := s.mem.Put(nc("c", "n230", map[string]string{"team": "b"}))
	gone := s.mem.Delete("c", "n240")

	rest := next(t, w, 250, true)
	events := slices.Concat(first, rest)
	byName := map[string]event{}
	for _, e := range events[:249] {
		if e.typ != watch.Added {
			t.Fatalf("initial events: %v, want 249 ADDED first", e)
		}
		byName[e.name] = e
	}
	if _, ok := byName["c.n240"]; ok {
		t.Errorf("n240, deleted before its page was read, was sent")
	}
	same(t, "n230, changed before its page was read, as its page shows it", []event{byName["c.n230"]}, event{watch.Added, "c.n230", rv(unread), "b"}.String())
	same(t, "after the initial events", events[249:],
		event{watch.Modified, "c.n005", rv(sent), "b"}.String(),
		event{watch.Bookmark, "", rv(gone), ""}.String())
}
