package feed

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// memFeed is an in-memory store.ChangeFeed for unit tests.
type memFeed struct {
	mu      sync.Mutex
	changes []store.Change
	horizon int64
	notes   chan struct{}
	// reads counts Changes calls with after >= 0 below the newest change
	// (history reads); delay slows every call.
	reads int
	delay time.Duration
}

func newMemFeed() *memFeed { return &memFeed{notes: make(chan struct{}, 1)} }

func (m *memFeed) add(kind store.Kind, n int) { m.addIn("c", kind, n) }

// addIn adds n changes of objects of cluster.
func (m *memFeed) addIn(cluster string, kind store.Kind, n int) {
	m.mu.Lock()
	for i := 0; i < n; i++ {
		rv := int64(len(m.changes)) + 1
		m.changes = append(m.changes, store.Change{ResourceVersion: rv, Type: store.ChangeAdded, Kind: kind,
			NodeCapacity: &store.NodeCapacity{ClusterID: cluster, Node: store.Node{Name: fmt.Sprint("n", rv)}, ResourceVersion: rv}})
	}
	m.mu.Unlock()
	select {
	case m.notes <- struct{}{}:
	default:
	}
}

func (m *memFeed) Changes(_ context.Context, after int64, limit int) ([]store.Change, int64, error) {
	m.mu.Lock()
	delay := m.delay
	m.mu.Unlock()
	time.Sleep(delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	if after < int64(len(m.changes)) {
		m.reads++
	}
	if after < m.horizon {
		return nil, 0, fmt.Errorf("after %d below %d: %w", after, m.horizon, store.ErrCompacted)
	}
	var out []store.Change
	for _, c := range m.changes {
		if c.ResourceVersion > after && len(out) < limit {
			out = append(out, c)
		}
	}
	return out, int64(len(m.changes)), nil
}

func (m *memFeed) Notifications(context.Context) (<-chan struct{}, error) { return m.notes, nil }

func (m *memFeed) Compact(_ context.Context, _ time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.horizon = int64(len(m.changes))
	return m.horizon, nil
}
