package discovery

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
)

// clusterStore is a store.Writer holding rows of some clusters; it records
// which ones were deleted.
type clusterStore struct {
	recordingStore
	mu       sync.Mutex
	clusters []string
	deleted  []string
}

func (s *clusterStore) Clusters(context.Context) ([]string, error) { return s.clusters, nil }

func (s *clusterStore) DeleteCluster(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted = append(s.deleted, id)
	return nil
}

func (s *clusterStore) deletedClusters() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.deleted))
}

// memberKubeconfig points at a port nothing listens on: the workers it
// starts only retry.
const memberKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`

// TestMemberRemovalGrace: an emptied member directory, or registry rows of
// a cluster nobody configures, delete nothing until the grace period has
// passed; a member back within it is kept.
func TestMemberRemovalGrace(t *testing.T) {
	const grace = 5 * time.Minute
	dir := t.TempDir()
	write := func(id string) {
		if err := os.WriteFile(filepath.Join(dir, id), []byte(memberKubeconfig), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(id string) {
		if err := os.Remove(filepath.Join(dir, id)); err != nil {
			t.Fatal(err)
		}
	}
	write("a")
	write("b")
	clk := testingclock.NewFakeClock(time.Now())
	tuning := DefaultTuning()
	tuning.Clock = clk
	st := &clusterStore{clusters: []string{"a", "b", "gone"}}
	m := newMembers(membersParams{Dir: dir, DirInterval: time.Second, RemovalGrace: grace, Tuning: tuning, Store: st})
	ctx := klog.NewContext(t.Context(), klog.Background())
	defer m.stopAll()

	round := func() {
		found, ok := m.scan(ctx)
		if !ok {
			t.Fatal("scan failed")
		}
		m.findStale(ctx, found)
		m.removeAbsent(ctx)
	}
	steps := []struct {
		name        string
		change      func()
		advance     time.Duration
		wantRunning []string
		wantDeleted []string
	}{
		{name: "start: rows of an unconfigured cluster are kept", wantRunning: []string{"a", "b"}},
		{name: "directory emptied: nothing removed at once", change: func() { remove("a"); remove("b") }, advance: time.Minute,
			wantRunning: []string{"a", "b"}},
		{name: "b comes back within the grace period", change: func() { write("b") }, advance: time.Minute,
			wantRunning: []string{"a", "b"}},
		{name: "grace passed for a and gone, not for b", advance: grace - time.Minute,
			wantRunning: []string{"b"}, wantDeleted: []string{"a", "gone"}},
		{name: "later rounds delete nothing more", advance: grace,
			wantRunning: []string{"b"}, wantDeleted: []string{"a", "gone"}},
	}
	for _, step := range steps {
		if step.change != nil {
			step.change()
		}
		clk.Step(step.advance)
		round()
		var running []string
		for _, w := range m.workers() {
			running = append(running, w.clusterID)
		}
		slices.Sort(running)
		if !slices.Equal(running, step.wantRunning) {
			t.Errorf("%s: running %v, want %v", step.name, running, step.wantRunning)
		}
		if got := st.deletedClusters(); !slices.Equal(got, step.wantDeleted) {
			t.Errorf("%s: deleted %v, want %v", step.name, got, step.wantDeleted)
		}
	}
}
