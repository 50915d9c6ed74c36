package feed

import (
	"sort"
)

// window holds the most recent changes, oldest first: every change with a
// version in (floor, newest] — bounded by count and bytes (store.Change's
// Size), the oldest going first.
type window struct {
	items    []Item
	bytes    int
	floor    int64
	maxItems int
	maxBytes int
}

func (w *window) reset(floor int64) {
	w.items, w.bytes, w.floor = nil, 0, floor
}

// add appends the newest change and evicts the oldest beyond the bounds.
func (w *window) add(it Item) {
	w.items = append(w.items, it)
	w.bytes += it.Change.Size
	drop := 0
	for len(w.items)-drop > w.maxItems || (w.bytes > w.maxBytes && len(w.items)-drop > 1) {
		w.bytes -= w.items[drop].Change.Size
		w.floor = w.items[drop].ResourceVersion
		drop++
	}
	if drop > 0 {
		// The dropped items are not cleared: subscriptions may still hold
		// views of them (Subscription.Backlog).
		w.items = w.items[drop:]
		// Reallocate now and then, so the dropped front is freed.
		if cap(w.items) > 2*w.maxItems && len(w.items) < cap(w.items)/4 {
			w.items = append([]Item(nil), w.items...)
		}
	}
}

// since returns the changes after rv (rv >= floor), oldest first; the
// caller must not modify the slice.
func (w *window) since(rv int64) []Item {
	i := sort.Search(len(w.items), func(i int) bool { return w.items[i].ResourceVersion > rv })
	return w.items[i:]
}
