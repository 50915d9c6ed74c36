package feed

import (
	"sort"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// window holds the most recent changes, oldest first: every change with a
// version in (floor, newest] — bounded by count and estimated bytes, the
// oldest going first.
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
	w.bytes += changeSize(it.Change)
	drop := 0
	for len(w.items)-drop > w.maxItems || (w.bytes > w.maxBytes && len(w.items)-drop > 1) {
		w.bytes -= changeSize(w.items[drop].Change)
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

// changeSize estimates the memory a change holds: its records' strings
// and maps, plus a fixed overhead per record.
func changeSize(c *store.Change) int {
	const record = 512
	n := 64
	for _, nc := range []*store.NodeCapacity{c.NodeCapacity, c.PrevNodeCapacity} {
		if nc == nil {
			continue
		}
		n += record + len(nc.ClusterID) + len(nc.Node.Name) + len(nc.Node.UID) + mapSize(nc.Node.Labels)
		for _, cond := range nc.Node.Conditions {
			n += 64 + len(cond.Type) + len(cond.Status) + len(cond.Reason) + len(cond.Message)
		}
		for _, t := range nc.Node.Taints {
			n += 48 + len(t.Key) + len(t.Value) + len(t.Effect)
		}
	}
	for _, cn := range []*store.ClusterNamespace{c.ClusterNamespace, c.PrevClusterNamespace} {
		if cn == nil {
			continue
		}
		n += record + len(cn.ClusterID) + len(cn.Namespace.Name) + len(cn.Namespace.UID) + mapSize(cn.Namespace.Labels)
		for _, q := range cn.Quotas {
			n += 64 + len(q.Name) + mapSize(q.Hard) + mapSize(q.Used)
		}
	}
	for _, cc := range []*store.ClusterCapacity{c.ClusterCapacity, c.PrevClusterCapacity} {
		if cc != nil {
			n += record + len(cc.ClusterID) + mapSize(cc.Labels)
		}
	}
	return n
}

func mapSize(m map[string]string) int {
	n := 48 * len(m)
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}
