package discovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// clusterStore is a store.Writer holding rows of some clusters. It records
// the views of the members reported to it and answers as the registry
// would for the members the test says are removed: the others of a view's
// Unconfigured are absent.
type clusterStore struct {
	recordingStore
	clusters []string

	mu      sync.Mutex
	views   []store.MembersView
	removed map[string]bool
	fail    error
}

func (s *clusterStore) Clusters(context.Context) ([]string, error) { return s.clusters, nil }

func (s *clusterStore) ReconcileMembers(_ context.Context, v store.MembersView) (store.MembersReconciled, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.views = append(s.views, v)
	if s.fail != nil {
		return store.MembersReconciled{}, s.fail
	}
	out := store.MembersReconciled{Absent: map[string]time.Time{}}
	for _, id := range v.Unconfigured {
		if s.removed[id] {
			out.Removed = append(out.Removed, id)
		} else {
			out.Absent[id] = time.Now()
		}
	}
	for _, id := range v.Listed {
		delete(s.removed, id)
	}
	return out, nil
}

// lastView returns the last view reported and how many were.
func (s *clusterStore) lastView() (store.MembersView, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.views) == 0 {
		return store.MembersView{}, 0
	}
	return s.views[len(s.views)-1], len(s.views)
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

// TestMembersReportViews: each read of the directory is reported to the
// registry, which decides removals: a member gone from the directory keeps
// running until the registry says it is removed, then stops; only a member
// listed anew (first read, or back after a read without it) may bring a
// removed one back. A directory that is unreadable or names no member while
// there are members reports nothing and removes nothing, and says so.
func TestMembersReportViews(t *testing.T) {
	RegisterMetrics()
	const grace = 5 * time.Minute
	dir := t.TempDir()
	write := func(id string) {
		if err := os.WriteFile(filepath.Join(dir, id), []byte(memberKubeconfig), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(ids ...string) func() {
		return func() {
			for _, id := range ids {
				if err := os.Remove(filepath.Join(dir, id)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	write("a")
	write("b")
	st := &clusterStore{clusters: []string{"a", "b", "gone"}, removed: map[string]bool{}}
	m := newMembers(testMembersConfig(dir, grace, st), "")
	ctx := klog.NewContext(t.Context(), klog.Background())
	defer m.stopAll()

	steps := []struct {
		name        string
		change      func()
		wantView    *store.MembersView // nil: no view reported
		wantRunning []string
		wantUnknown float64
	}{
		{name: "start: every member listed anew, the registry's unconfigured one absent",
			wantView:    &store.MembersView{Configured: []string{"a", "b"}, Listed: []string{"a", "b"}, Unconfigured: []string{"gone"}},
			wantRunning: []string{"a", "b"}},
		{name: "a's file removed: a absent, still mirrored", change: remove("a"),
			wantView:    &store.MembersView{Configured: []string{"b"}, Unconfigured: []string{"a", "gone"}},
			wantRunning: []string{"a", "b"}},
		{name: "the registry removed a and gone: a stops", change: func() { st.removed["a"], st.removed["gone"] = true, true },
			wantView:    &store.MembersView{Configured: []string{"b"}, Unconfigured: []string{"a", "gone"}},
			wantRunning: []string{"b"}},
		{name: "later reads no longer name them",
			wantView:    &store.MembersView{Configured: []string{"b"}},
			wantRunning: []string{"b"}},
		{name: "a's file back: listed anew", change: func() { write("a") },
			wantView:    &store.MembersView{Configured: []string{"a", "b"}, Listed: []string{"a"}},
			wantRunning: []string{"a", "b"}},
		{name: "directory emptied: nothing reported, every member kept", change: remove("a", "b"),
			wantRunning: []string{"a", "b"}, wantUnknown: 1},
		{name: "directory gone: the same", change: func() {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
		}, wantRunning: []string{"a", "b"}, wantUnknown: 1},
		{name: "directory back: nothing listed anew, nothing lost", change: func() {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			write("a")
			write("b")
		}, wantView: &store.MembersView{Configured: []string{"a", "b"}}, wantRunning: []string{"a", "b"}},
	}
	reported := 0
	for _, step := range steps {
		if step.change != nil {
			step.change()
		}
		m.round(ctx)
		view, n := st.lastView()
		switch {
		case step.wantView == nil && n != reported:
			t.Errorf("%s: reported %+v, want no view", step.name, view)
		case step.wantView != nil:
			step.wantView.Grace = grace
			if n != reported+1 || fmt.Sprint(view) != fmt.Sprint(*step.wantView) {
				t.Errorf("%s: reported %+v (%d views), want %+v", step.name, view, n-reported, *step.wantView)
			}
		}
		reported = n
		if got := runningIDs(m); !slices.Equal(got, step.wantRunning) {
			t.Errorf("%s: running %v, want %v", step.name, got, step.wantRunning)
		}
		if got, _ := testutil.GetGaugeMetricValue(membersUnknown); got != step.wantUnknown {
			t.Errorf("%s: members_config_unknown %v, want %v", step.name, got, step.wantUnknown)
		}
	}

	// A member listed anew is told again until a report succeeds.
	st.fail = errors.New("registry down")
	write("c")
	m.round(ctx)
	st.fail = nil
	m.round(ctx)
	if view, _ := st.lastView(); !slices.Equal(view.Listed, []string{"c"}) {
		t.Errorf("after a failed report: listed %v, want [c] again", view.Listed)
	}
}

// TestMembersEmptyDirWithoutMembers: an empty directory of a server with
// no member besides the hosting cluster (the optional Secret not created)
// is a configuration like any other, reported, not an unknown one.
func TestMembersEmptyDirWithoutMembers(t *testing.T) {
	RegisterMetrics()
	st := &clusterStore{clusters: []string{"local"}}
	cfg := testMembersConfig(t.TempDir(), 0, st)
	cfg.Clock = clock.RealClock{}
	cfg.Hosting = &Member{ID: "local", Config: nil}
	m := newMembers(cfg, "")
	m.stale = m.findStale(t.Context())
	found, ok := m.readConfig(klog.Background())
	if !ok || len(found) != 0 {
		t.Fatalf("readConfig = %v, %v; want an empty configuration", found, ok)
	}
	if got, _ := testutil.GetGaugeMetricValue(membersUnknown); got != 0 {
		t.Errorf("members_config_unknown %v, want 0", got)
	}
}

func runningIDs(m *members) []string {
	var ids []string
	for _, w := range m.workers() {
		ids = append(ids, w.clusterID)
	}
	slices.Sort(ids)
	return ids
}

// testMembersConfig is discovery's default configuration, unshared, for a
// member directory read every second on a fake clock.
func testMembersConfig(dir string, grace time.Duration, st store.Writer) *Config {
	cfg := DefaultConfig()
	cfg.LeaderElection.LeaderElect = false
	cfg.Members = MembersConfig{Dir: dir, DirInterval: time.Second, RemovalGrace: grace}
	cfg.Clock = testingclock.NewFakeClock(time.Now())
	cfg.Store = st
	return &cfg
}
