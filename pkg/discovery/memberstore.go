package discovery

import (
	"context"
	"errors"
	"sync"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// batchStore is what a syncer commits its batches through.
type batchStore interface {
	Apply(ctx context.Context, b store.Batch) error
	Cursor(ctx context.Context, clusterID string, r store.Resource) (string, error)
}

// samplesStore is what the scraper records its samples through.
type samplesStore interface {
	RecordNodeMetrics(ctx context.Context, samples []store.NodeMetricsSample, policy store.UsageReporting) (store.MetricsRecorded, error)
	RecordNamespaceMetrics(ctx context.Context, samples []store.NamespaceMetricsSample, policy store.UsageReporting) (int64, error)
}

// memberStore is the registry as one worker writes it: every write carries
// the fence of the worker's claim on the member. A write refused as fenced
// (another replica claimed the member, or it was removed) or rewound (the
// registry failed over since the claim) calls onLost, which stops the
// worker's run; fenced writes are counted once per claim.
type memberStore struct {
	w      store.Writer
	onLost func(error)

	mu     sync.Mutex
	fence  store.Fence
	fenced *sync.Once
}

func newMemberStore(w store.Writer, clusterID string, onLost func(error)) *memberStore {
	return &memberStore{w: w, fence: store.Fence{ClusterID: clusterID}, onLost: onLost, fenced: &sync.Once{}}
}

// claim makes owner the member's writer; later writes carry the new fence.
func (m *memberStore) claim(ctx context.Context, owner string) (store.Fence, error) {
	f, err := m.w.ClaimMember(ctx, m.clusterID(), owner)
	if err != nil {
		return f, err
	}
	m.mu.Lock()
	m.fence, m.fenced = f, &sync.Once{}
	m.mu.Unlock()
	return f, nil
}

func (m *memberStore) current() store.Fence {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fence
}

func (m *memberStore) clusterID() string { return m.current().ClusterID }

// check passes err through, calling onLost when it says the write was
// fenced (counted the first time per claim) or rewound.
func (m *memberStore) check(err error) error {
	switch {
	case errors.Is(err, store.ErrFenced):
		m.mu.Lock()
		once := m.fenced
		m.mu.Unlock()
		once.Do(func() { fencedWrites.WithLabelValues(m.clusterID()).Inc() })
		m.onLost(err)
	case errors.Is(err, store.ErrRewound):
		m.onLost(err)
	}
	return err
}

func (m *memberStore) Apply(ctx context.Context, b store.Batch) error {
	f := m.current()
	b.Epoch, b.Failovers = f.Epoch, f.Failovers
	return m.check(m.w.Apply(ctx, b))
}

func (m *memberStore) Cursor(ctx context.Context, clusterID string, r store.Resource) (string, error) {
	return m.w.Cursor(ctx, clusterID, r)
}

func (m *memberStore) RecordNodeMetrics(ctx context.Context, samples []store.NodeMetricsSample, policy store.UsageReporting) (store.MetricsRecorded, error) {
	rec, err := m.w.RecordNodeMetrics(ctx, m.current(), samples, policy)
	return rec, m.check(err)
}

func (m *memberStore) RecordNamespaceMetrics(ctx context.Context, samples []store.NamespaceMetricsSample, policy store.UsageReporting) (int64, error) {
	n, err := m.w.RecordNamespaceMetrics(ctx, m.current(), samples, policy)
	return n, m.check(err)
}

func (m *memberStore) CheckMemberIdentity(ctx context.Context, identity string) (bool, error) {
	changed, err := m.w.CheckMemberIdentity(ctx, m.current(), identity)
	return changed, m.check(err)
}
