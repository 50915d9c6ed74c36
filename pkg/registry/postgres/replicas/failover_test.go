package replicas_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestStandbyReads: with a standby configured, a read that needs a
// resourceVersion just written on the primary returns it (the standby is
// waited for, or the primary answers), and a read at a version the standby
// holds is served by the standby even while the primary is down.
func TestStandbyReads(t *testing.T) {
	primary := pgtest.NewInstance(t, pgtest.Options{})
	standby := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	s, ctx := haStore(t, primary.DSN(), postgres.Options{ReadDSNs: []string{standby.DSN()}, NoPrimaryReads: true})

	for i := range 20 {
		mustApply(t, s, ctx, store.Batch{ClusterID: "c1", Nodes: []store.Node{node("n"+string(rune('a'+i)), 1000, 1<<30)}})
		written := presentRV(t, s, ctx)
		page, err := s.NodeCapacities().List(ctx, store.ListOptions{Freshness: store.Freshness{Latest: true}})
		if err != nil {
			t.Fatal(err)
		}
		if page.ResourceVersion < written || len(page.Items) != i+1 {
			t.Fatalf("write %d: latest list at %d with %d items, want at least %d with %d", i, page.ResourceVersion, len(page.Items), written, i+1)
		}
		page, err = s.NodeCapacities().List(ctx, store.ListOptions{Freshness: store.Freshness{AtLeast: written}})
		if err != nil || page.ResourceVersion < written {
			t.Fatalf("write %d: list at least %d answered %+v, %v", i, written, page, err)
		}
	}
	written := presentRV(t, s, ctx)
	if err := standby.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := primary.Pause(); err != nil {
		t.Fatal(err)
	}
	page, err := s.NodeCapacities().List(ctx, store.ListOptions{Freshness: store.Freshness{AtLeast: written}})
	if err != nil || page.ResourceVersion < written || len(page.Items) != 20 {
		t.Fatalf("primary down: list at least %d from the standby answered %+v, %v", written, page, err)
	}
	if _, err := s.NodeCapacities().List(ctx, store.ListOptions{Freshness: store.Freshness{Latest: true}}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("primary down: a latest list needs the primary's present; got %v, want unavailable", err)
	}
	if err := primary.Resume(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFailoverDoesNotReuseResourceVersions: the primary commits changes its
// standby never receives, dies, and the standby is promoted: the first
// connection to the new primary records the failover, new changes get
// versions above anything the old primary handed out, and reading the
// feed from a lost version answers compacted (410) while reading from a
// version the new primary holds goes on without a gap.
func TestFailoverDoesNotReuseResourceVersions(t *testing.T) {
	primary := pgtest.NewInstance(t, pgtest.Options{})
	standby := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	s, ctx := haStore(t, pgtest.MultiHostDSN("", "read-write", primary, standby.Instance), postgres.Options{})

	mustApply(t, s, ctx, store.Batch{ClusterID: "c1", Nodes: []store.Node{node("kept", 1000, 1<<30)}})
	claim, err := s.ClaimMember(ctx, "c2", "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c2", Epoch: claim.Epoch, Failovers: claim.Failovers, Nodes: []store.Node{node("fenced", 1000, 1<<30)}})
	kept := presentRV(t, s, ctx)
	if err := standby.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := standby.Pause(); err != nil { // the standby receives nothing more
		t.Fatal(err)
	}
	for _, name := range []string{"lost-1", "lost-2", "lost-3"} {
		mustApply(t, s, ctx, store.Batch{ClusterID: "c1", Nodes: []store.Node{node(name, 1000, 1<<30)}})
	}
	lost := presentRV(t, s, ctx)
	firstPage, err := s.NodeCapacities().List(ctx, store.ListOptions{Limit: 1})
	if err != nil || firstPage.Continue == "" || firstPage.ResourceVersion != lost {
		t.Fatalf("first page before the failover: %+v, %v", firstPage, err)
	}
	if err := standby.FailOverPaused(ctx); err != nil {
		t.Fatal(err)
	}

	// Connections to the dead primary fail until the pool has replaced them.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := s.Apply(ctx, store.Batch{ClusterID: "c1", Nodes: []store.Node{node("after", 1000, 1<<30)}})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("no write after the failover: %v", err)
	}
	// A writer that claimed its member before the failover may have lost
	// writes: it is told so, and goes on once it claimed the member again.
	err = s.Apply(ctx, store.Batch{ClusterID: "c2", Epoch: claim.Epoch, Failovers: claim.Failovers, Nodes: []store.Node{node("fenced-2", 1000, 1<<30)}})
	if !errors.Is(err, store.ErrRewound) {
		t.Errorf("write claimed before the failover: %v, want rewound", err)
	}
	if claim, err = s.ClaimMember(ctx, "c2", "replica-a"); err != nil || claim.Failovers != 1 {
		t.Fatalf("claim after the failover: %+v, %v; want failover count 1", claim, err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c2", Epoch: claim.Epoch, Failovers: claim.Failovers, Nodes: []store.Node{node("fenced-2", 1000, 1<<30)}})
	after := presentRV(t, s, ctx)
	if after <= lost {
		t.Fatalf("after the failover the registry is at %d, not above %d the old primary handed out: versions reused", after, lost)
	}
	n, err := s.GetNodeCapacity(ctx, "c1", "after")
	if err != nil || n.ResourceVersion <= lost {
		t.Fatalf("node written after the failover: %+v, %v; want a version above %d", n, err, lost)
	}
	if _, err := s.GetNodeCapacity(ctx, "c1", "lost-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a node the standby never received: %v, want not found (the failover lost it)", err)
	}

	// A list begun before the failover at a lost version cannot continue.
	if _, err := s.NodeCapacities().List(ctx, store.ListOptions{Limit: 1, Continue: firstPage.Continue}); !errors.Is(err, store.ErrExpiredContinue) {
		t.Errorf("continue a list begun at lost version %d: %v, want expired (410)", firstPage.ResourceVersion, err)
	}

	// A watcher that saw a lost version must relist; one at a kept version
	// resumes and gets the new change, nothing lost in between.
	if _, _, err := s.Changes(ctx, store.ChangeFilter{}, lost, 100); !errors.Is(err, store.ErrCompacted) {
		t.Errorf("changes after lost version %d: %v, want compacted (410)", lost, err)
	}
	if names := changedNodes(t, s, ctx, kept); !slices.Equal(names, []string{"after", "fenced-2"}) {
		t.Errorf("changes after kept version %d: %v, want only the nodes written after the failover", kept, names)
	}
}
