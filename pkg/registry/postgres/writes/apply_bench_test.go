package writes_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// Sizes of BenchmarkApply's member: a relist of a large member, and the
// watch batches that follow it.
const (
	benchNodes      = 5000
	benchPods       = 20000
	benchNamespaces = 50
	benchWatchBatch = 100
)

// BenchmarkApply measures Apply against the package's test PostgreSQL: a
// relist of a 5,000-node, 20,000-pod member (into an empty member, with
// every row changed, and unchanged as after a 410), and a 100-object watch
// batch on that member. It reports ns/row beside ns/op. docs/benchmarks.md,
// "Registry writes: parallel arrays vs one jsonb parameter", has the command
// and the numbers.
func BenchmarkApply(b *testing.B) {
	b.Run("relist=new", func(b *testing.B) {
		s, _ := benchStore(b)
		ctx := b.Context()
		relist := benchRelist(0)
		rows := benchRows(relist)
		i := 0
		for b.Loop() {
			relist.ClusterID = fmt.Sprintf("new-%d", i) // an empty member each time: every row inserted
			i++
			benchApply(b, s, ctx, relist)
		}
		reportPerRow(b, rows)
	})
	b.Run("relist=changed", func(b *testing.B) {
		s, dsn := benchStore(b)
		ctx := b.Context()
		relists := [2]store.Batch{benchRelist(0), benchRelist(1)}
		benchApply(b, s, ctx, relists[1])
		benchAnalyze(b, dsn)
		i := 0
		for b.Loop() {
			benchApply(b, s, ctx, relists[i%2]) // every node and pod differs from the last relist
			i++
		}
		reportPerRow(b, benchRows(relists[0]))
	})
	b.Run("relist=unchanged", func(b *testing.B) {
		s, dsn := benchStore(b)
		ctx := b.Context()
		relist := benchRelist(0)
		benchApply(b, s, ctx, relist)
		benchAnalyze(b, dsn)
		for b.Loop() {
			benchApply(b, s, ctx, relist) // no row changes: the comparisons alone
		}
		reportPerRow(b, benchRows(relist))
	})
	b.Run("watch=100", func(b *testing.B) {
		s, dsn := benchStore(b)
		ctx := b.Context()
		benchApply(b, s, ctx, benchRelist(0))
		benchAnalyze(b, dsn)
		batches := [2]store.Batch{benchWatch(1), benchWatch(0)}
		i := 0
		for b.Loop() {
			benchApply(b, s, ctx, batches[i%2])
			i++
		}
		reportPerRow(b, benchRows(batches[0]))
	})
}

// BenchmarkRecordNodeMetrics measures one scrape of the 5,000-node member in
// which every node's usage is due: the history insert and the usage report.
func BenchmarkRecordNodeMetrics(b *testing.B) {
	s, dsn := benchStore(b)
	ctx := b.Context()
	benchApply(b, s, ctx, benchRelist(0))
	benchAnalyze(b, dsn)
	benchScrapes(b, s, ctx)
}

// BenchmarkRecordNodeMetricsQuiet measures a scrape of a quiet member, the
// fleet's steady state: every node of the 5,000 sampled every 30 s with
// its usage unchanged, under the default reporting (5 % threshold, no
// period), so no node is due and no view row is written; what is paid is
// the history, its hourly rollups and the due and absent checks. ns/row is
// per node sampled.
func BenchmarkRecordNodeMetricsQuiet(b *testing.B) {
	s, dsn := benchStore(b)
	ctx := b.Context()
	benchApply(b, s, ctx, benchRelist(0))
	policy := store.UsageReporting{Threshold: 0.05, UnknownAfter: 5 * time.Minute}
	samples := make([]store.NodeMetricsSample, benchNodes)
	scrape := func(i int) store.MetricsRecorded {
		benchSamples(samples, benchScrapeStart.Add(time.Duration(i)*30*time.Second), 0)
		got, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, samples, policy)
		if err != nil {
			b.Fatalf("RecordNodeMetrics: %v", err)
		}
		return got
	}
	if got := scrape(0); got.Reported != benchNodes {
		b.Fatalf("the first scrape reported %d nodes, want all %d", got.Reported, benchNodes)
	}
	benchAnalyze(b, dsn)
	i := 1
	for b.Loop() {
		if got := scrape(i); got.Reported != 0 || got.Stored != benchNodes {
			b.Fatalf("a quiet scrape stored %d samples and reported %d nodes, want %d and 0", got.Stored, got.Reported, benchNodes)
		}
		i++
	}
	reportPerRow(b, benchNodes)
}

// benchScrapes records, per op, a sample of every node of member "c" with
// every node's usage due, and reports ns/row per node.
func benchScrapes(b *testing.B, s *postgres.Store, ctx context.Context) {
	b.Helper()
	samples := make([]store.NodeMetricsSample, benchNodes)
	i := 0
	for b.Loop() {
		benchSamples(samples, benchScrapeStart.Add(time.Duration(i)*time.Second), i)
		i++
		got, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, samples, reportEvery)
		if err != nil {
			b.Fatalf("RecordNodeMetrics: %v", err)
		}
		if got.Reported != benchNodes {
			b.Fatalf("reported %d nodes, want %d", got.Reported, benchNodes)
		}
	}
	reportPerRow(b, benchNodes)
}

// benchScrapeStart is the time of the benchmarks' first scrape, after
// benchRelist's nodes were created.
var benchScrapeStart = time.Date(2025, 1, 2, 4, 0, 0, 0, time.UTC)

// benchSamples fills samples with a scrape at `at` of every node of member
// "c", each node's usage its own plus drift (the same drift: the same usage).
func benchSamples(samples []store.NodeMetricsSample, at time.Time, drift int) {
	for n := range samples {
		samples[n] = store.NodeMetricsSample{ClusterID: "c", Node: fmt.Sprintf("node-%05d", n),
			CPUNanoCores: int64(1e8 + n + drift), MemoryBytes: int64(1<<30 + n + drift), ObservedAt: at, Window: 30 * time.Second}
	}
}

// benchStore opens a migrated store on a fresh database and returns its DSN.
func benchStore(b *testing.B) (*postgres.Store, string) {
	b.Helper()
	dsn := pgtest.NewTestDatabase(b)
	s, err := postgres.Open(b.Context(), dsn, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	if err := s.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	return s, dsn
}

// benchAnalyze gives the planner statistics of the populated member, as
// autovacuum would soon after a relist.
func benchAnalyze(b *testing.B, dsn string) {
	b.Helper()
	ctx := b.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
}

func benchApply(b *testing.B, s *postgres.Store, ctx context.Context, batch store.Batch) {
	b.Helper()
	if err := s.Apply(ctx, batch); err != nil {
		b.Fatalf("Apply: %v", err)
	}
}

func benchRows(batch store.Batch) int {
	return len(batch.Namespaces) + len(batch.Nodes) + len(batch.Pods) + len(batch.Quotas)
}

func reportPerRow(b *testing.B, rows int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows), "ns/row")
}

// benchRelist is a relist of member "c": namespaces, nodes and pods, four
// pods per node. Versions 0 and 1 differ in every node and pod.
func benchRelist(version int) store.Batch {
	batch := store.Batch{ClusterID: "c", Replace: []store.Resource{
		store.ResourceNamespaces, store.ResourceNodes, store.ResourcePods}}
	for i := range benchNamespaces {
		batch.Namespaces = append(batch.Namespaces, benchNamespace(i))
	}
	for i := range benchNodes {
		batch.Nodes = append(batch.Nodes, benchNode(i, version))
	}
	for i := range benchPods {
		batch.Pods = append(batch.Pods, benchPod(i, version))
	}
	return batch
}

// benchWatch is a watch batch of 100 objects: 20 nodes and 80 pods of
// benchRelist's member, in version v.
func benchWatch(version int) store.Batch {
	batch := store.Batch{ClusterID: "c"}
	for i := range benchWatchBatch / 5 {
		batch.Nodes = append(batch.Nodes, benchNode(i*97, version))
	}
	for i := range benchWatchBatch - len(batch.Nodes) {
		batch.Pods = append(batch.Pods, benchPod(i*89, version))
	}
	return batch
}

func benchNamespace(i int) store.Namespace {
	name := fmt.Sprintf("team-%02d", i)
	return store.Namespace{Name: name, UID: "uid-" + name, Phase: "Active",
		Labels:    map[string]string{"team": name, "kubernetes.io/metadata.name": name},
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func benchNode(i, version int) store.Node {
	name := fmt.Sprintf("node-%05d", i)
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return store.Node{
		Name: name, UID: "uid-" + name, CreatedAt: at,
		Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
			"node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3)},
		Capacity:    store.Quantities{CPUMillis: 4000, MemoryBytes: 16 << 30, Pods: 110},
		Allocatable: store.Quantities{CPUMillis: 3920 - int64(version), MemoryBytes: 15 << 30, Pods: 110},
		Ready:       true,
		Conditions: []store.NodeCondition{
			{Type: "MemoryPressure", Status: "False", Reason: "KubeletHasSufficientMemory", LastTransitionTime: at},
			{Type: "DiskPressure", Status: "False", Reason: "KubeletHasNoDiskPressure", LastTransitionTime: at},
			{Type: "Ready", Status: "True", Reason: "KubeletReady", Message: "kubelet is posting ready status", LastTransitionTime: at},
		},
		Taints: []store.Taint{{Key: "dedicated", Value: "batch", Effect: "PreferNoSchedule"}},
	}
}

func benchPod(i, version int) store.Pod {
	return store.Pod{
		Namespace: fmt.Sprintf("team-%02d", i%benchNamespaces), Name: fmt.Sprintf("pod-%06d", i),
		UID: fmt.Sprintf("uid-pod-%06d", i), NodeName: fmt.Sprintf("node-%05d", (i+version)%benchNodes), Phase: "Running",
		CPURequestMillis: 100 + int64(version), MemoryRequestBytes: 128 << 20,
	}
}

// BenchmarkResourceShapes compares, in one run, the 5,000-node relist
// (into an empty member, and with every row changed) and a scrape of every
// node's usage for today's CPU/memory-only rows and for nodes with four
// other resources (nvidia.com/gpu, example.com/fpga, ephemeral-storage,
// hugepages-2Mi) whose pods request two of them; it reports the database
// bytes per node of the node and pod tables after the relist. See
// docs/benchmarks.md, "Other resources".
func BenchmarkResourceShapes(b *testing.B) {
	for _, shape := range []struct {
		name  string
		shape func(store.Batch) store.Batch
	}{{"cpu-memory", func(b store.Batch) store.Batch { return b }}, {"extended=4", withExtended}} {
		b.Run("shape="+shape.name+"/relist=new", func(b *testing.B) {
			s, dsn := benchStore(b)
			ctx := b.Context()
			relist := shape.shape(benchRelist(0))
			i := 0
			for b.Loop() {
				relist.ClusterID = fmt.Sprintf("new-%d", i)
				i++
				benchApply(b, s, ctx, relist)
			}
			reportPerRow(b, benchRows(relist))
			reportTableBytes(b, dsn, i)
		})
		b.Run("shape="+shape.name+"/relist=changed", func(b *testing.B) {
			s, dsn := benchStore(b)
			ctx := b.Context()
			relists := [2]store.Batch{shape.shape(benchRelist(0)), shape.shape(benchRelist(1))}
			benchApply(b, s, ctx, relists[1])
			benchAnalyze(b, dsn)
			i := 0
			for b.Loop() {
				benchApply(b, s, ctx, relists[i%2])
				i++
			}
			reportPerRow(b, benchRows(relists[0]))
		})
		b.Run("shape="+shape.name+"/scrape", func(b *testing.B) {
			s, dsn := benchStore(b)
			ctx := b.Context()
			benchApply(b, s, ctx, shape.shape(benchRelist(0)))
			benchAnalyze(b, dsn)
			benchScrapes(b, s, ctx)
		})
	}
}

// withExtended gives every node of a relist four other resources and every
// pod requests of two of them.
func withExtended(batch store.Batch) store.Batch {
	nodes := make([]store.Node, len(batch.Nodes))
	for i, n := range batch.Nodes {
		other := map[string]int64{"nvidia.com/gpu": 8, "example.com/fpga": 2, "ephemeral-storage": 100 << 30, "hugepages-2Mi": 1 << 30}
		n.Capacity.Other, n.Allocatable.Other = other, other
		nodes[i] = n
	}
	pods := make([]store.Pod, len(batch.Pods))
	for i, p := range batch.Pods {
		p.OtherRequests = map[string]int64{"nvidia.com/gpu": 1 + p.CPURequestMillis%2, "ephemeral-storage": 1 << 30}
		pods[i] = p
	}
	batch.Nodes, batch.Pods = nodes, pods
	return batch
}

// reportTableBytes reports the bytes per node of the node and pod tables
// (with their indexes and TOAST) over the members relisted.
func reportTableBytes(b *testing.B, dsn string, members int) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var nodeBytes, podBytes int64
	if err := conn.QueryRow(ctx, `SELECT pg_total_relation_size('cluster_node'), pg_total_relation_size('cluster_pod')`).Scan(&nodeBytes, &podBytes); err != nil {
		b.Fatal(err)
	}
	nodes := float64(members * benchNodes)
	b.ReportMetric(float64(nodeBytes)/nodes, "node-bytes/node")
	b.ReportMetric(float64(podBytes)/nodes, "pod-bytes/node")
}

// benchChangeLogMember writes a member's change log as the change-log
// benchmarks measure it: the member added (nodes and namespaces), its pods
// in a batch of their own, then a relist that changes every node.
func benchChangeLogMember(b *testing.B, s *postgres.Store, ctx context.Context, id string) {
	b.Helper()
	nodes, pods := benchRelist(0), benchRelist(0)
	nodes.ClusterID, nodes.Pods, nodes.Replace = id, nil, nil
	pods.ClusterID, pods.Nodes, pods.Namespaces, pods.Replace = id, nil, nil, nil
	changed := benchRelist(1)
	changed.ClusterID = id
	benchApply(b, s, ctx, nodes)
	benchApply(b, s, ctx, pods)
	benchApply(b, s, ctx, changed)
}

// BenchmarkChangeLogBytes measures what the change log keeps per node of a
// member that is added (an ADDED entry per node), whose pods then arrive in
// a batch of their own (a MODIFIED per node: requests) and which a relist
// then changes everywhere (another MODIFIED): change-log-B/node and
// B/entry, the table's size with its indexes and TOAST.
func BenchmarkChangeLogBytes(b *testing.B) {
	s, dsn := benchStore(b)
	ctx := b.Context()
	members := 0
	for b.Loop() {
		benchChangeLogMember(b, s, ctx, fmt.Sprintf("m%d", members))
		members++
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var bytes, entries int64
	if err := conn.QueryRow(ctx, `SELECT pg_total_relation_size('registry_change'), (SELECT count(*) FROM registry_change)`).Scan(&bytes, &entries); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(bytes)/float64(members*benchNodes), "change-log-B/node")
	b.ReportMetric(float64(bytes)/float64(entries), "B/entry")
	b.ReportMetric(float64(entries)/float64(members*benchNodes), "entries/node")
	var delta float64
	if err := conn.QueryRow(ctx, `SELECT avg(pg_column_size(prev_delta)) FROM registry_change
		WHERE type = 'MODIFIED' AND kind = 'NodeCapacity'`).Scan(&delta); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(delta, "modified-delta-B")
	var live int64
	if err := conn.QueryRow(ctx, `SELECT sum(pg_column_size(c.*)) FROM registry_change c`).Scan(&live); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(live)/float64(members*benchNodes), "live-B/node")
}

// BenchmarkChangesRead measures what a change-feed follower costs per entry:
// reading a member's change log (benchChangeLogMember) in
// pages of 1,000, decoded as the follower decodes them. Every replica
// reads every entry once, so each replica beyond the first adds this per
// entry the fleet writes.
func BenchmarkChangesRead(b *testing.B) {
	s, _ := benchStore(b)
	ctx := b.Context()
	benchChangeLogMember(b, s, ctx, "m")
	entries := 0
	for b.Loop() {
		entries = 0
		for after := int64(0); ; {
			changes, _, err := s.Changes(ctx, store.ChangeFilter{}, after, 1000)
			if err != nil {
				b.Fatal(err)
			}
			entries += len(changes)
			if len(changes) < 1000 {
				break
			}
			after = changes[len(changes)-1].ResourceVersion
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(entries)/1000, "µs/entry")
	b.ReportMetric(float64(entries), "entries")
}
