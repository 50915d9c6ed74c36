// Package feedtest is an in-memory registry for unit tests of watch and
// REST behaviour: a store.ChangeFeed whose changes come from puts and
// deletes of NodeCapacities, and the reads NodeCapacity is served from, so
// watches run against a real feed.Follower without PostgreSQL.
package feedtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// MemFeed is an in-memory registry of NodeCapacities (and, for the feed
// only, ClusterNamespaces and ClusterCapacities) with a change feed. It
// passes the change-feed conformance suite PostgreSQL passes (storetest).
// Selectors in list options are ignored: watches filter themselves.
type MemFeed struct {
	mu      sync.Mutex
	changes []store.Change
	// committed holds each change's commit time, for Compact.
	committed  []time.Time
	rv         int64
	horizon    int64
	nodes      map[string]store.NodeCapacity
	namespaces map[string]store.ClusterNamespace
	capacities map[string]store.ClusterCapacity
	notes      notifier
	delay      time.Duration
	// historyReads counts Changes calls after a version below the newest.
	historyReads int
	// returned counts the changes Changes returned.
	returned int
}

// New returns an empty MemFeed.
func New() *MemFeed {
	return &MemFeed{nodes: map[string]store.NodeCapacity{}, namespaces: map[string]store.ClusterNamespace{},
		capacities: map[string]store.ClusterCapacity{}}
}

func key(cluster, node string) string { return cluster + "/" + node }

// recordSize is the Size a change counts per record, about what the
// registry's estimate gives a small node.
const recordSize = 1024

// Put adds or replaces a NodeCapacity (ADDED or MODIFIED) and returns its
// new resourceVersion.
func (m *MemFeed) Put(nc store.NodeCapacity) int64 {
	return put(m, m.nodes, store.KindNodeCapacity, nc.ClusterID, key(nc.ClusterID, nc.Node.Name), nc, setNodeRV)
}

// Delete removes a NodeCapacity (DELETED at a new resourceVersion).
func (m *MemFeed) Delete(cluster, node string) int64 {
	return remove(m, m.nodes, store.KindNodeCapacity, cluster, key(cluster, node), setNodeRV)
}

func setNodeRV(n *store.NodeCapacity, rv int64) { n.ResourceVersion = rv }

// put records r under k in state at a new resourceVersion (set by setRV):
// an ADDED change, or MODIFIED from what k held.
func put[R any](m *MemFeed, state map[string]R, kind store.Kind, cluster, k string, r R, setRV func(*R, int64)) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rv++
	setRV(&r, m.rv)
	c := store.Change{ResourceVersion: m.rv, Type: store.ChangeAdded, Kind: kind, ClusterID: cluster, Object: new(r), Size: recordSize}
	if prev, ok := state[k]; ok {
		c.Type, c.Prev, c.Size = store.ChangeModified, new(prev), 2*recordSize
	}
	state[k] = r
	m.commit(c)
	return m.rv
}

// remove drops k from state: a DELETED change at a new resourceVersion,
// whose object is the last state at that version. Nothing for a missing k.
func remove[R any](m *MemFeed, state map[string]R, kind store.Kind, cluster, k string, setRV func(*R, int64)) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, ok := state[k]
	if !ok {
		return m.rv
	}
	m.rv++
	last := prev
	setRV(&last, m.rv)
	delete(state, k)
	m.commit(store.Change{ResourceVersion: m.rv, Type: store.ChangeDeleted, Kind: kind,
		ClusterID: cluster, Object: new(last), Prev: new(prev), Size: 2 * recordSize})
	return m.rv
}

// AddN appends n ADDED changes of kind for synthetic objects of cluster
// (not kept as state: for tests of the feed itself).
func (m *MemFeed) AddN(cluster string, kind store.Kind, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for range n {
		m.rv++
		c := store.Change{ResourceVersion: m.rv, Type: store.ChangeAdded, Kind: kind, ClusterID: cluster, Size: recordSize}
		switch kind {
		case store.KindClusterNamespace:
			c.Object = &store.ClusterNamespace{ClusterID: cluster, Namespace: store.Namespace{Name: fmt.Sprint("ns", m.rv)}, ResourceVersion: m.rv}
		default:
			c.Object = &store.NodeCapacity{ClusterID: cluster, Node: store.Node{Name: fmt.Sprint("n", m.rv)}, ResourceVersion: m.rv}
		}
		m.commit(c)
	}
}

// SetDelay makes every Changes call take at least d.
func (m *MemFeed) SetDelay(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delay = d
}

// HistoryReads counts Changes calls after a version below the newest.
func (m *MemFeed) HistoryReads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.historyReads
}

// Returned is how many changes Changes has returned in all.
func (m *MemFeed) Returned() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.returned
}

// CompactTo drops the history up to rv: resuming below it fails with 410.
func (m *MemFeed) CompactTo(rv int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.horizon = rv
}

// ResourceVersion is the newest version.
func (m *MemFeed) ResourceVersion() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rv
}

// commit appends c to the history, committed now, and notifies; m.mu is held.
func (m *MemFeed) commit(c store.Change) {
	m.changes = append(m.changes, c)
	m.committed = append(m.committed, time.Now())
	m.notes.signal()
}

// Changes implements store.ChangeFeed.
func (m *MemFeed) Changes(_ context.Context, filter store.ChangeFilter, after int64, limit int) ([]store.Change, int64, error) {
	m.mu.Lock()
	delay := m.delay
	m.mu.Unlock()
	time.Sleep(delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	if after < m.rv {
		m.historyReads++
	}
	if err := filter.Validate(); err != nil {
		return nil, 0, err
	}
	if after < m.horizon {
		return nil, 0, fmt.Errorf("after %d below %d: %w", after, m.horizon, store.ErrCompacted)
	}
	var out []store.Change
	for _, c := range m.changes {
		if c.ResourceVersion > after && len(out) < limit && filter.Matches(&c) {
			out = append(out, c)
		}
	}
	m.returned += len(out)
	return out, m.rv, nil
}

// Notifications implements store.ChangeFeed: each call has a channel of
// its own, signalled after each commit and closed when ctx ends.
func (m *MemFeed) Notifications(ctx context.Context) (<-chan struct{}, error) {
	return m.notes.subscribe(ctx)
}

// Compact implements store.ChangeFeed: it drops the changes committed
// before olderThan, up to the first committed at or after it.
func (m *MemFeed) Compact(_ context.Context, olderThan time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, c := range m.changes {
		if c.ResourceVersion <= m.horizon {
			continue
		}
		if !m.committed[i].Before(olderThan) {
			break
		}
		m.horizon = c.ResourceVersion
	}
	return m.horizon, nil
}

// NodeCapacities is the NodeCapacity source over the in-memory records.
func (m *MemFeed) NodeCapacities() store.Source[store.NodeCapacity] {
	return store.Source[store.NodeCapacity]{
		Kind: store.KindNodeCapacity,
		Get: func(ctx context.Context, _, name string) (*store.NodeCapacity, error) {
			cluster, node, _ := strings.Cut(name, ".")
			return m.GetNodeCapacity(ctx, cluster, node)
		},
		List:   m.ListNodeCapacities,
		Stream: m.StreamNodeCapacities,
		Key:    nodeKey,
	}
}

// GetNodeCapacity serves a get.
func (m *MemFeed) GetNodeCapacity(_ context.Context, cluster, node string) (*store.NodeCapacity, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	nc, ok := m.nodes[key(cluster, node)]
	if !ok {
		return nil, store.ErrNotFound
	}
	return &nc, nil
}

// ListNodeCapacities serves a list of everything (no paging, no selectors).
func (m *MemFeed) ListNodeCapacities(_ context.Context, _ store.ListOptions) (*store.Page[store.NodeCapacity], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &store.Page[store.NodeCapacity]{Items: m.sorted(), ResourceVersion: m.rv}, nil
}

// StreamNodeCapacities streams everything in keyset pages, as the
// registry does: each page holds the records after the previous one's
// last key as they are when it is read, at the feed's version then.
func (m *MemFeed) StreamNodeCapacities(_ context.Context, _ store.ListOptions, pageSize int, yield func(store.StreamPage[store.NodeCapacity]) error) error {
	var after *store.ListKey
	for {
		page := m.page(after, pageSize)
		if err := yield(page); err != nil {
			return err
		}
		if page.Final {
			return nil
		}
		last := nodeKey(&page.Items[len(page.Items)-1])
		after = &last
	}
}

// page reads up to size records after the key after (nil: from the first).
func (m *MemFeed) page(after *store.ListKey, size int) store.StreamPage[store.NodeCapacity] {
	m.mu.Lock()
	items, rv := m.sorted(), m.rv
	m.mu.Unlock()
	if after != nil {
		i, found := slices.BinarySearchFunc(items, *after, func(nc store.NodeCapacity, k store.ListKey) int { return nodeKey(&nc).Compare(k) })
		if found {
			i++
		}
		items = items[i:]
	}
	if len(items) > size {
		return store.StreamPage[store.NodeCapacity]{Items: items[:size], ResourceVersion: rv}
	}
	return store.StreamPage[store.NodeCapacity]{Items: items, ResourceVersion: rv, Final: true}
}

// nodeKey is a NodeCapacity's list key.
func nodeKey(nc *store.NodeCapacity) store.ListKey { return store.ListKey{nc.ClusterID, nc.Node.Name} }

func (m *MemFeed) sorted() []store.NodeCapacity {
	out := make([]store.NodeCapacity, 0, len(m.nodes))
	for _, nc := range m.nodes {
		out = append(out, nc)
	}
	slices.SortFunc(out, func(a, b store.NodeCapacity) int { return nodeKey(&a).Compare(nodeKey(&b)) })
	return out
}
