package discovery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestWorkerWedged(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	const timeout = 5 * time.Minute
	tests := []struct {
		name     string
		pending  int
		lastBeat time.Time
		wedged   bool
	}{
		{"idle watch: nothing pending, silent for long", 0, now.Add(-time.Hour), false},
		{"pending and recently alive", 10, now.Add(-time.Minute), false},
		{"pending and silent past the timeout", 10, now.Add(-6 * time.Minute), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &syncer{syncerParams: syncerParams{Resource: &memberResource{name: "pods"}}, pending: tt.pending, lastBeat: tt.lastBeat}
			w := &worker{clusterID: "c1", syncers: []*syncer{s}}
			err := w.wedged(now, timeout)
			if (err != nil) != tt.wedged {
				t.Fatalf("wedged = %v, want %v", err, tt.wedged)
			}
			if err != nil && !strings.Contains(err.Error(), "cluster c1, pods: 10 events pending") {
				t.Errorf("error %q does not name the cluster, resource and backlog", err)
			}
		})
	}
}

// cursorStore answers the cursors it holds, "" for the others.
type cursorStore struct {
	recordingStore
	cursors map[store.Resource]string
}

func (s *cursorStore) Cursor(_ context.Context, _ string, r store.Resource) (string, error) {
	return s.cursors[r], nil
}

// TestReadinessIgnoresOptionalResources: the hosting cluster's first sync
// is its required resources' cursors; the optional (DRA) ones, which a
// member may not serve and an older replica holding the member does not
// mirror, do not hold readiness back.
func TestReadinessIgnoresOptionalResources(t *testing.T) {
	st := &cursorStore{cursors: map[store.Resource]string{}}
	r := &readiness{clusterID: "hosting", store: st}
	for _, res := range memberResources {
		if res.optional {
			continue
		}
		if err := r.check(t.Context()); err == nil {
			t.Fatalf("ready with the cursors %v", st.cursors)
		}
		st.cursors[res.name] = "10"
	}
	if err := r.check(t.Context()); err != nil {
		t.Errorf("not ready with every required resource's cursor: %v", err)
	}
}
