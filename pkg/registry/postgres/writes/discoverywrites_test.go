package writes_test

import (
	"errors"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestApplyRejectsWhatPostgresCannotStore: a NUL character in jsonb is a
// data exception, reported as store.ErrRejected so discovery quarantines the
// object instead of retrying the batch forever.
func TestApplyRejectsWhatPostgresCannotStore(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	n := node("n1", metricsNodeCPU, metricsNodeMem)
	n.Conditions = []store.NodeCondition{{Type: "Ready", Status: "True", Message: "disk\x00full"}}
	err := s.Apply(b.Ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{n}})
	if !errors.Is(err, store.ErrRejected) {
		t.Fatalf("Apply of a NUL in a condition message: %v; want ErrRejected", err)
	}
}

// TestCheckMemberIdentity: the first identity is recorded and keeps the
// cursors; the same one again changes nothing; another one drops the
// member's cursors (and only its).
func TestCheckMemberIdentity(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	for _, c := range []string{"m", "other"} {
		mustApply(t, s, ctx, store.Batch{ClusterID: c, Cursors: map[store.Resource]string{store.ResourceNodes: "100"}})
	}
	steps := []struct {
		identity    string
		wantChanged bool
		wantCursor  string
	}{
		{identity: "uid-1", wantCursor: "100"},
		{identity: "uid-1", wantCursor: "100"},
		{identity: "uid-2", wantChanged: true, wantCursor: ""},
	}
	for i, step := range steps {
		changed, err := s.CheckMemberIdentity(ctx, store.Fence{ClusterID: "m"}, step.identity)
		if err != nil || changed != step.wantChanged {
			t.Fatalf("step %d: CheckMemberIdentity(%s) = %v, %v; want %v", i, step.identity, changed, err, step.wantChanged)
		}
		if got, err := s.Cursor(ctx, "m", store.ResourceNodes); err != nil || got != step.wantCursor {
			t.Errorf("step %d: cursor %q, %v; want %q", i, got, err, step.wantCursor)
		}
	}
	if got, _ := s.Cursor(ctx, "other", store.ResourceNodes); got != "100" {
		t.Errorf("another member's cursor = %q, want it kept", got)
	}
	removeMember(t, s, ctx, "m")
	relist(t, s, ctx, "m")
	f, err := s.ClaimMember(ctx, "m", "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := s.CheckMemberIdentity(ctx, f, "uid-3"); err != nil || changed {
		t.Errorf("identity after the member was removed and listed anew: changed %v, %v; want a fresh start", changed, err)
	}
}

// TestReplaceKeepsPresentKeys: the last batch of a relist committed in
// chunks deletes only rows neither it nor the earlier chunks (Present) had.
func TestReplaceKeepsPresentKeys(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "c",
		Nodes: []store.Node{node("n1", 1000, 1<<30), node("n2", 1000, 1<<30), node("gone", 1000, 1<<30)},
		Pods:  []store.Pod{pod("a", "p1", "n1", 1, 1), pod("a", "p2", "n1", 1, 1), pod("a", "gone", "n1", 1, 1)},
	})
	// Chunks wrote n1 and p1 earlier; the last batch has n2 and p2.
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Replace: []store.Resource{store.ResourceNodes},
		Nodes: []store.Node{node("n2", 1000, 1<<30)}, Present: []store.ObjectKey{{Name: "n1"}}})
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Replace: []store.Resource{store.ResourcePods},
		Pods: []store.Pod{pod("a", "p2", "n1", 1, 1)}, Present: []store.ObjectKey{{Namespace: "a", Name: "p1"}}})
	if got := nodeKeys(listNodes(t, s, ctx, store.ListOptions{}).Items); got != "c.n1,c.n2" {
		t.Errorf("nodes after the chunked relist: %s, want c.n1,c.n2", got)
	}
	if n := getNode(t, s, ctx, "c", "n1"); n.Requested.Pods != 2 {
		t.Errorf("n1 counts %d pods, want 2 (p1 kept as present, gone deleted)", n.Requested.Pods)
	}
}
