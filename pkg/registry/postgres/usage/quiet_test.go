package usage_test

import (
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// quiet is the default reporting: no period, usage unknown after 5 minutes
// without a sample confirming it.
var quiet = store.UsageReporting{Threshold: 0.05, UnknownAfter: 5 * time.Minute}

// TestQuietMeansQuiet: without a report period, 20 minutes of constant
// usage change nothing; a move past the threshold is one change; a node the
// scrapes stop listing keeps its usage for UnknownAfter, then shows it as
// unknown (one change); and maintenance leaves the old samples of a member
// whose heartbeat goes on alone, and makes those of a member whose
// heartbeat stopped unknown.
func TestQuietMeansQuiet(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	const nodes = 50
	applyMetricsNodes(t, s, ctx, nodes)
	t0 := time.Now().UTC().Truncate(time.Hour)
	at := func(k int) time.Time { return t0.Add(time.Duration(k) * 30 * time.Second) }
	// scrape records one sample of each of the first n nodes, n0000 at cpu.
	scrape := func(k, n int, cpuMillis int64) store.MetricsRecorded {
		t.Helper()
		samples := make([]store.NodeMetricsSample, n)
		for i := range samples {
			c := int64(300 + k%3) // jitter well under the threshold
			if i == 0 {
				c = cpuMillis
			}
			samples[i] = store.NodeMetricsSample{ClusterID: "c", Node: nodeNameN(i), CPUNanoCores: c * 1e6, MemoryBytes: gib, ObservedAt: at(k), Window: 20 * time.Second}
		}
		got, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, samples, quiet)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := scrape(0, nodes, 300); got.Reported != nodes {
		t.Fatalf("first scrape reported %d nodes, want %d", got.Reported, nodes)
	}
	rv, changes := registryRV(t, s, ctx), countRows(t, b, `SELECT count(*) FROM registry_change`)
	for k := 1; k <= 40; k++ { // 20 minutes: four of the old 5-minute periods
		if got := scrape(k, nodes, 300); got.Reported != 0 {
			t.Fatalf("quiet scrape %d reported %d nodes, want none", k, got.Reported)
		}
	}
	if now := registryRV(t, s, ctx); now != rv {
		t.Errorf("registry resourceVersion %d → %d over 20 quiet minutes, want unchanged", rv, now)
	}
	if now := countRows(t, b, `SELECT count(*) FROM registry_change`); now != changes {
		t.Errorf("registry_change %d → %d rows over 20 quiet minutes, want none added", changes, now)
	}
	if u := getNode(t, s, ctx, "c", nodeNameN(1)).Usage; u == nil || !u.Timestamp.Equal(at(0)) {
		t.Errorf("a quiet node shows %+v, want its first sample kept", u)
	}

	if got := scrape(41, nodes, 800); got.Reported != 1 {
		t.Errorf("a jump past the threshold reported %d nodes, want exactly 1", got.Reported)
	}
	if u := getNode(t, s, ctx, "c", nodeNameN(0)).Usage; u == nil || u.CPUNanoCores != 800e6 {
		t.Errorf("the node that jumped shows %+v, want 800m", u)
	}

	// The last node drops out of the scrapes at k=42: kept while its last
	// sample (k=41) is less than UnknownAfter (10 scrapes) older than the
	// scrape's newest, unknown at once after.
	last := nodeNameN(nodes - 1)
	for k := 42; k <= 51; k++ {
		if got := scrape(k, nodes-1, 800); got.Reported != 0 {
			t.Fatalf("scrape %d without %s reported %d, want none until its usage is %s unconfirmed", k, last, got.Reported, quiet.UnknownAfter)
		}
	}
	if got := scrape(52, nodes-1, 800); got.Reported != 1 {
		t.Errorf("scrape 52, %s unconfirmed for over %s: reported %d, want its usage made unknown", last, quiet.UnknownAfter, got.Reported)
	}
	if u := getNode(t, s, ctx, "c", last).Usage; u != nil {
		t.Errorf("%s, missing from the scrapes, shows %+v; want unknown", last, u)
	}

	// Maintenance an hour on: every reported sample is old, but while the
	// member's heartbeat is recent nothing becomes unknown.
	later := at(52).Add(time.Hour)
	if err := s.RecordMemberState(ctx, store.Fence{ClusterID: "c"}, store.MemberStatus{State: store.MemberSynced, LastUsage: later}); err != nil {
		t.Fatal(err)
	}
	if cc, err := s.GetClusterCapacity(ctx, "c"); err != nil || !cc.LastUsage.Equal(later) {
		t.Errorf("ClusterCapacity's usage heartbeat: %+v, %v; want %s", cc, err, later)
	}
	maintain := func(now time.Time) store.MetricsMaintained {
		t.Helper()
		got, err := s.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: now, RetainAfter: t0.Add(-time.Hour), UnknownBefore: now.Add(-quiet.UnknownAfter)})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := maintain(later.Add(time.Minute)); got.Unknown != 0 {
		t.Errorf("maintenance with a fresh heartbeat made %d usages unknown, want none", got.Unknown)
	}
	if got := maintain(later.Add(10 * time.Minute)); got.Unknown != nodes-1 {
		t.Errorf("maintenance 10 minutes after the heartbeat stopped made %d usages unknown, want %d", got.Unknown, nodes-1)
	}
}

// TestQuietNamespaces: a namespace with constant usage takes no version
// without a period; one that stops running pods (absent from the scrapes)
// keeps its usage for UnknownAfter, then shows it as unknown; maintenance
// makes a namespace's usage unknown only when its history has no sample
// since.
func TestQuietNamespaces(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "c",
		Namespaces: []store.Namespace{{Name: "a", UID: "a", Phase: "Active"}, {Name: "b", UID: "b", Phase: "Active"}},
	})
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	at := func(k int) time.Time { return t0.Add(time.Duration(k) * 30 * time.Second) }
	scrape := func(k int, names ...string) int64 {
		t.Helper()
		var samples []store.NamespaceMetricsSample
		for _, n := range names {
			samples = append(samples, store.NamespaceMetricsSample{ClusterID: "c", Namespace: n, CPUNanoCores: 200e6, MemoryBytes: gib, Pods: 2, ObservedAt: at(k)})
		}
		got, err := s.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: "c"}, samples, quiet)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := scrape(0, "a", "b"); got != 2 {
		t.Fatalf("first scrape reported %d namespaces, want 2", got)
	}
	rv := registryRV(t, s, ctx)
	for k := 1; k <= 20; k++ {
		if got := scrape(k, "a", "b"); got != 0 {
			t.Fatalf("quiet scrape %d reported %d, want none", k, got)
		}
	}
	if now := registryRV(t, s, ctx); now != rv {
		t.Errorf("registry resourceVersion %d → %d over quiet scrapes, want unchanged", rv, now)
	}
	// b runs no pod from k=21 on; unconfirmed for more than 5 minutes at k=31.
	for k := 21; k <= 30; k++ {
		if got := scrape(k, "a"); got != 0 {
			t.Fatalf("scrape %d without b reported %d, want none yet", k, got)
		}
	}
	if got := scrape(31, "a"); got != 1 {
		t.Errorf("scrape 31, b unconfirmed for over 5 minutes: reported %d, want b's usage made unknown", got)
	}
	if u := getNamespace(t, s, ctx, "c", "b").Usage; u != nil {
		t.Errorf("b shows usage %+v, want unknown", u)
	}
	// Maintenance: a's history confirms its usage until at(31).
	maintain := func(before time.Time) int64 {
		t.Helper()
		got, err := s.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: before, RetainAfter: t0.Add(-time.Hour), UnknownBefore: before})
		if err != nil {
			t.Fatal(err)
		}
		return got.Unknown
	}
	if got := maintain(at(31).Add(-time.Minute)); got != 0 {
		t.Errorf("maintenance with a sample since: %d usages made unknown, want none", got)
	}
	if got := maintain(at(31).Add(time.Minute)); got != 1 {
		t.Errorf("maintenance with no sample since: %d usages made unknown, want a's", got)
	}
	// A member that runs no pod at all: its scrapes, empty, end a usage
	// unconfirmed for 5 minutes by the database's clock (the samples were
	// taken two hours ago).
	scrape(32, "a")
	if got := scrape(33); got != 1 || getNamespace(t, s, ctx, "c", "a").Usage != nil {
		t.Errorf("an empty scrape reported %d; want a's usage, unconfirmed for 2 hours, made unknown", got)
	}
}
