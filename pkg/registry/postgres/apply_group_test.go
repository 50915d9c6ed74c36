package postgres_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestGroupCommit: batches of different members that queue while the
// writer lock is held commit together, in one transaction, and a batch of
// the group that is fenced fails alone.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.ctx
	if _, err := s.ClaimMember(ctx, "m-fenced", "another replica"); err != nil {
		t.Fatal(err)
	}
	const members, committers = 16, 4
	batch := func(cluster string) store.Batch {
		return store.Batch{ClusterID: cluster, Namespaces: []store.Namespace{namespace("team-a")},
			Nodes: []store.Node{node("n0", 4000, 16*gib)},
			Pods:  []store.Pod{{Namespace: "team-a", Name: "p", UID: "p", NodeName: "n0", Phase: "Running", CPURequestMillis: 100}}}
	}
	release := holdWriterLock(t, b)
	type result struct {
		cluster string
		err     error
	}
	results := make(chan result)
	apply := func(cluster string) {
		go func() { results <- result{cluster, s.Apply(ctx, batch(cluster))} }()
	}
	for i := range members {
		apply(fmt.Sprintf("m%02d", i))
	}
	// One batch per committer waits for the writer lock; the rest queue.
	poll(t, "the batches beyond the committers to queue", func() bool { return s.PendingApplies() == members-committers })
	apply("m-fenced") // epoch 0, the member is claimed
	poll(t, "the fenced batch to queue", func() bool { return s.PendingApplies() == members+1-committers })
	release()
	for range members + 1 {
		r := <-results
		switch {
		case r.cluster == "m-fenced" && !errors.Is(r.err, store.ErrFenced):
			t.Errorf("the fenced member's batch: %v, want ErrFenced", r.err)
		case r.cluster != "m-fenced" && r.err != nil:
			t.Errorf("member %s: %v", r.cluster, r.err)
		}
	}
	for i := range members {
		if n := getNode(t, s, ctx, fmt.Sprintf("m%02d", i), "n0"); n.Requested.CPUMillis != 100 {
			t.Errorf("member m%02d's node requests %dm, want its pod's 100m", i, n.Requested.CPUMillis)
		}
	}
	// committed_at is the transaction's start: the committers' first
	// transactions, then one for the batches that queued.
	if n := countRows(t, b, `SELECT count(DISTINCT committed_at) FROM registry_change WHERE kind = 'NodeCapacity'`); n != committers+1 {
		t.Errorf("%d batches committed in %d transactions, want %d", members, n, committers+1)
	}
	if n := countRows(t, b, `SELECT count(*) FROM cluster_node WHERE cluster_id = 'm-fenced'`); n != 0 {
		t.Errorf("the fenced batch wrote %d nodes, want none", n)
	}
}
