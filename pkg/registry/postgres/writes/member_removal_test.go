package writes_test

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestMemberRemovalDecidedOnce: two replicas report their views of the
// members. A member one view drops and the other still lists is not absent;
// once every view drops it, it is absent from then on, and when the grace
// has passed the replicas that find it due race and exactly one removes it:
// one DELETED per object, its owner fenced out, claims refused, also from a
// view that still lists it without listing it anew. Its usage history stays;
// listed anew, it is claimed again and its history answers as before.
func TestMemberRemovalDecidedOnce(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	owner, err := s.ClaimMember(ctx, "m", "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	rows := store.Batch{ClusterID: "m", Epoch: owner.Epoch, Nodes: []store.Node{node("n1", 4000, 8<<30)},
		Namespaces: []store.Namespace{namespace("team-a")}, Pods: []store.Pod{pod("team-a", "p", "n1", 100, 1<<20)},
		Cursors: map[store.Resource]string{store.ResourceNodes: "7"}}
	mustApply(t, s, ctx, rows)
	mustApply(t, s, ctx, store.Batch{ClusterID: "other", Nodes: []store.Node{node("n1", 4000, 8<<30)}})
	recordHistory(t, s, owner)
	queries := []store.UsageQuery{
		{ClusterID: "m", Since: time.Now().Add(-3 * time.Hour)},
		{ClusterID: "m", Node: "n1", Since: time.Now().Add(-3 * time.Hour)},
		{ClusterID: "m", Namespace: "team-a", Since: time.Now().Add(-3 * time.Hour)},
	}
	history := usageHistories(t, s, queries)
	const grace = time.Hour
	report := func(v store.MembersView) store.MembersReconciled {
		t.Helper()
		v.Grace = grace
		res, err := s.ReconcileMembers(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	absentSince := func() *time.Time {
		var since *time.Time
		if err := queryRow(t, b, `SELECT absent_since FROM discovery_member WHERE cluster_id = 'm'`).Scan(&since); err != nil {
			t.Fatal(err)
		}
		return since
	}

	// Replica A no longer lists m, B still does: B's view clears A's mark.
	if res := report(store.MembersView{Configured: []string{"other"}, Unconfigured: []string{"m"}}); len(res.Absent) != 1 || len(res.Removed) != 0 {
		t.Fatalf("A's view: %+v; want m absent", res)
	}
	report(store.MembersView{Configured: []string{"m", "other"}})
	if since := absentSince(); since != nil {
		t.Fatalf("m absent since %s after B listed it; want not absent", since)
	}
	// Neither lists it: absent from the first view that missed it.
	first := report(store.MembersView{Configured: []string{"other"}, Unconfigured: []string{"m"}}).Absent["m"]
	if again := report(store.MembersView{Configured: []string{"other"}, Unconfigured: []string{"m"}}).Absent["m"]; first.IsZero() || !again.Equal(first) {
		t.Fatalf("m absent since %s, then %s; want the first view's time kept", first, again)
	}
	if _, err := queryExec(t, b, `UPDATE discovery_member SET absent_since = absent_since - interval '2 hours' WHERE cluster_id = 'm'`); err != nil {
		t.Fatal(err)
	}

	// Both find it due at once: one removes it.
	before := registryRV(t, s, ctx)
	var wg sync.WaitGroup
	results := make([]store.MembersReconciled, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = s.ReconcileMembers(ctx, store.MembersView{Configured: []string{"other"}, Unconfigured: []string{"m"}, Grace: grace})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if removedNow := len(results[0].RemovedNow) + len(results[1].RemovedNow); removedNow != 1 ||
		!slices.Equal(results[0].Removed, []string{"m"}) || !slices.Equal(results[1].Removed, []string{"m"}) {
		t.Fatalf("concurrent views: %+v; want m removed by exactly one", results)
	}
	changes, _, err := s.Changes(ctx, store.ChangeFilter{}, before, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range changes {
		got = append(got, string(ch.Type)+" "+changeKey(ch))
	}
	if want := []string{"DELETED cc/m/m", "DELETED node/m/n1", "DELETED ns/m/team-a"}; !sameSet(got, want) {
		t.Errorf("changes of the removal %q, want %q", got, want)
	}

	// Nothing of the old owner lands; nobody claims it from a view that
	// merely still lists it.
	if err := s.Apply(ctx, rows); !errors.Is(err, store.ErrFenced) {
		t.Errorf("the old owner's Apply: %v, want ErrFenced", err)
	}
	if _, err := s.RecordNamespaceMetrics(ctx, owner, []store.NamespaceMetricsSample{{ClusterID: "m", Namespace: "team-a", CPUNanoCores: 1,
		Pods: 1, ObservedAt: time.Now()}}, reportEvery); !errors.Is(err, store.ErrFenced) {
		t.Errorf("the old owner's namespace samples: %v, want ErrFenced", err)
	}
	if err := s.RecordMemberState(ctx, owner, store.MemberStatus{State: store.MemberSynced}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("the old owner's mirroring state: %v, want ErrFenced", err)
	}
	report(store.MembersView{Configured: []string{"m", "other"}})
	if _, err := s.ClaimMember(ctx, "m", "replica-b"); !errors.Is(err, store.ErrMemberRemoved) {
		t.Errorf("claim from a view that still lists m: %v, want ErrMemberRemoved", err)
	}
	if ids, err := s.Clusters(ctx); err != nil || !slices.Equal(ids, []string{"other"}) {
		t.Errorf("Clusters = %v, %v; want [other] (m removed)", ids, err)
	}
	if n := countRows(t, b, `SELECT count(*) FROM cluster_pod WHERE cluster_id = 'm'`); n != 0 {
		t.Errorf("%d pods of the removed member, want 0", n)
	}
	if got := usageHistories(t, s, queries); !reflect.DeepEqual(got, history) {
		t.Errorf("usage history after the removal\n%+v\nwant it kept\n%+v", got, history)
	}

	// Listed anew: claimed again, mirrored afresh, its history as before.
	report(store.MembersView{Configured: []string{"m", "other"}, Listed: []string{"m"}})
	again, err := s.ClaimMember(ctx, "m", "replica-b")
	if err != nil || again.Epoch <= owner.Epoch {
		t.Fatalf("claim after m was listed anew: %+v, %v; want an epoch above %d", again, err, owner.Epoch)
	}
	if cursor, _ := s.Cursor(ctx, "m", store.ResourceNodes); cursor != "" {
		t.Errorf("cursor %q kept across the removal, want none (a relist)", cursor)
	}
	rows.Epoch = again.Epoch
	mustApply(t, s, ctx, rows)
	if got := usageHistories(t, s, queries); !reflect.DeepEqual(got, history) {
		t.Errorf("usage history of the member back\n%+v\nwant\n%+v", got, history)
	}
}

// recordHistory records two hours of samples of m's node n1 and namespace
// team-a, as the scraper of f's owner does.
func recordHistory(t *testing.T, s *postgres.Store, f store.Fence) {
	t.Helper()
	ctx := t.Context()
	start := time.Now().UTC().Add(-2 * time.Hour)
	for i := range 24 {
		at := start.Add(time.Duration(i) * 5 * time.Minute)
		cpu, mem := int64(1e8*(1+i%7)), int64(1<<20)*int64(100+i*13%50)
		if _, err := s.RecordNodeMetrics(ctx, f, []store.NodeMetricsSample{{ClusterID: "m", Node: "n1", CPUNanoCores: cpu, MemoryBytes: mem,
			ObservedAt: at, Window: 30 * time.Second}}, reportEvery); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RecordNamespaceMetrics(ctx, f, []store.NamespaceMetricsSample{{ClusterID: "m", Namespace: "team-a", CPUNanoCores: cpu / 2,
			MemoryBytes: mem / 2, Pods: 1, ObservedAt: at}}, reportEvery); err != nil {
			t.Fatal(err)
		}
	}
}

func usageHistories(t *testing.T, s *postgres.Store, queries []store.UsageQuery) []store.UsageHistory {
	t.Helper()
	out := make([]store.UsageHistory, len(queries))
	for i, q := range queries {
		h, err := s.UsageHistory(t.Context(), q)
		if err != nil {
			t.Fatalf("UsageHistory(%+v): %v", q, err)
		}
		if h.Samples == 0 {
			t.Fatalf("UsageHistory(%+v): no samples", q)
		}
		out[i] = *h
	}
	return out
}
