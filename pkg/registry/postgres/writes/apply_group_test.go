package writes_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestGroupCommit: batches of different members that queue while an
// earlier ticket is open commit together, in one transaction; a batch of the
// group that is fenced fails alone; a member's next batch waits for the
// group that holds its last one; a relist commits alone, at once.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	if _, err := s.ClaimMember(ctx, "m-fenced", "another replica"); err != nil {
		t.Fatal(err)
	}
	// The group commit of an engine of its own on the store's database.
	e := writes.NewTestEngine(t, b.DSN)
	const members, committers = 16, 4
	batch := func(cluster string) store.Batch {
		return store.Batch{ClusterID: cluster, Namespaces: []store.Namespace{namespace("team-a")},
			Nodes: []store.Node{node("n0", 4000, 16*gib)},
			Pods:  []store.Pod{{Namespace: "team-a", Name: "p", UID: "p", NodeName: "n0", Phase: "Running", CPURequestMillis: 100}}}
	}
	release := holdEarlierTicket(t, b)
	type result struct {
		cluster string
		err     error
	}
	results := make(chan result)
	apply := func(cluster string) {
		go func() { results <- result{cluster, e.Apply(ctx, batch(cluster))} }()
	}
	apply("m00")
	poll(t, "m00's batch to wait for the earlier ticket", func() bool {
		return countRows(t, b, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
	})
	// The member's next batch waits for that group, though committers are free.
	go func() {
		second := batch("m00")
		second.Pods = append(second.Pods, store.Pod{Namespace: "team-a", Name: "p2", UID: "p2", NodeName: "n0", Phase: "Running", CPURequestMillis: 100})
		results <- result{"m00", e.Apply(ctx, second)}
	}()
	time.Sleep(200 * time.Millisecond)
	if n := e.PendingApplies(); n != 1 {
		t.Errorf("%d batches queued, want m00's second one, waiting for the group holding its first", n)
	}
	for i := 1; i < members; i++ {
		apply(fmt.Sprintf("m%02d", i))
	}
	// One batch per committer waits for the earlier ticket; the rest queue.
	poll(t, "the batches beyond the committers to queue", func() bool { return e.PendingApplies() == members+1-committers })
	apply("m-fenced") // epoch 0, the member is claimed
	poll(t, "the fenced batch to queue", func() bool { return e.PendingApplies() == members+2-committers })
	go func() { // a relist commits alone, without waiting for a committer
		relist := batch("m-relist")
		relist.Replace = []store.Resource{store.ResourceNodes}
		results <- result{"m-relist", e.Apply(ctx, relist)}
	}()
	time.Sleep(200 * time.Millisecond)
	if n := e.PendingApplies(); n != members+2-committers {
		t.Errorf("%d batches queued, want %d: the relist taken at once, though every committer is busy", n, members+2-committers)
	}
	release()
	for range members + 3 {
		r := <-results
		switch {
		case r.cluster == "m-fenced" && !errors.Is(r.err, store.ErrFenced):
			t.Errorf("the fenced member's batch: %v, want ErrFenced", r.err)
		case r.cluster != "m-fenced" && r.err != nil:
			t.Errorf("member %s: %v", r.cluster, r.err)
		}
	}
	for i := range members {
		want := map[bool]int64{true: 200, false: 100}[i == 0]
		if n := getNode(t, s, ctx, fmt.Sprintf("m%02d", i), "n0"); n.Requested.CPUMillis != want {
			t.Errorf("member m%02d's node requests %dm, want its pods' %dm", i, n.Requested.CPUMillis, want)
		}
	}
	// committed_at is the transaction's start. Beside m00, three batches
	// took the other committers; those that queued behind them committed in
	// one transaction; m00's second in one of its own after its first.
	if n := countRows(t, b, `SELECT count(DISTINCT committed_at) FROM registry_change WHERE cluster_id LIKE 'm__' AND cluster_id <> 'm00'`); n != committers {
		t.Errorf("%d batches committed in %d transactions, want %d: %d alone, then the %d that queued together", members-1, n, committers, committers-1, members-committers)
	}
	if n := countRows(t, b, `SELECT count(DISTINCT committed_at) FROM registry_change WHERE cluster_id = 'm00'`); n != 2 {
		t.Errorf("m00's two batches committed in %d transactions, want 2", n)
	}
	if n := countRows(t, b, `SELECT count(*) FROM cluster_node WHERE cluster_id = 'm-fenced'`); n != 0 {
		t.Errorf("the fenced batch wrote %d nodes, want none", n)
	}
}
