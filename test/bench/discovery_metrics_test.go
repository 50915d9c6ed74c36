package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/discovery"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// The quiet-fleet benchmark (issue "A quiet fleet stays quiet"): what a
// metrics scrape of nodeCount nodes writes and sends to watchers when usage
// does not move, what writing it costs against the design it replaced, and
// what a day of history costs to keep and to prune. See docs/benchmarks.md,
// "Quiet fleet: metrics write and watch events".
const (
	// metricsInterval and metricsRetention are the scraper's defaults
	// (--metrics-interval, --metrics-retention).
	metricsInterval  = 30 * time.Second
	metricsRetention = 24 * time.Hour
	// historySamples is a day of samples per node at the interval: 2,880.
	historySamples = int(metricsRetention / metricsInterval)
	// samplesPerHour is one hourly history partition's samples per node.
	samplesPerHour = int(time.Hour / metricsInterval)
	// quietFleetScrapes scrapes follow the first one (which reports every
	// node: nothing was reported before) in the watch part.
	quietFleetScrapes = 10
	// In scrape crossingScrape, every crossingEvery-th node (nodeCount /
	// crossingEvery of them) raises its CPU and memory usage by crossingStep
	// of its allocatable, twice the report threshold, and stays there.
	crossingScrape = 5
	crossingEvery  = 100
	crossingStep   = 0.10
	// usageJitter is how far, as a fraction of allocatable, usage wanders
	// around each node's level from scrape to scrape: at most 2× it apart,
	// well within the threshold.
	usageJitter = 0.01
	// metricsMarkerNode is the node whose label the watch part changes in
	// kube-apiserver after each scrape: its event, which discovery commits
	// after the scrape, marks the end of the scrape's events in the stream.
	metricsMarkerNode  = nodeCount - 1
	metricsMarkerLabel = "bench.platform.example.io/metrics-marker"
	// metricsMarkerTimeout bounds the wait for the marker's event.
	metricsMarkerTimeout = 30 * time.Second
	// legacyMetricsDatabase is the database, next to the registry's in the
	// same PostgreSQL server, that holds the baseline: the schema before
	// migration 004 and today's design's writes (legacyMetricsWriter).
	legacyMetricsDatabase = "platform_bench_legacy"
	// legacyMetricsMigration is the baseline's schema version: migration
	// 003, the last before 004 partitioned the history.
	legacyMetricsMigration = 3
	// prunedHours hourly partitions (an hour of samples each) are dropped,
	// and deleted from the baseline, one at a time, in the prune part.
	prunedHours = 2
	// quietReferenceScrapes scrapes follow the timed loop, written with
	// quietReferencePeriod instead of the default period: no node comes
	// due, so they time the new design's quiet scrape on the same history
	// (not part of ns/op). With a period of 200 years no node's period
	// turns before 2169 (phases are under 50 days).
	quietReferenceScrapes = 6
	quietReferencePeriod  = 200 * 365 * 24 * time.Hour
	// maxMetricsWriteRatio is the goal for the new design's scrape
	// write against today's, on the same history.
	maxMetricsWriteRatio = 0.25
)

// usageReporting is the policy the scraper uses by default
// (--usage-report-threshold, --usage-report-period).
var usageReporting = discovery.DefaultConfig().Metrics.UsageReporting

// benchMetricsQuietFleet measures a quiet fleet's metrics in three parts,
// each scrape a sample of every one of the member's nodeCount nodes, observed
// one metricsInterval after the previous scrape (timestamps from the real
// time of the first, so the history's partitions are the current ones), all
// written through d.registry as the scraper writes them
// (RecordNodeMetrics with the default reporting policy):
//
//  1. Watch events, untimed, with the server running: a NodeCapacity watch
//     is open through the aggregator; a first scrape reports every node, then
//     quietFleetScrapes scrapes keep usage within ±usageJitter of each
//     node's level, except that nodeCount/crossingEvery nodes move by
//     crossingStep in scrape crossingScrape. Per scrape: the change-log rows
//     written (registry_change entries above the version before it) and the
//     events the watch delivers before a marker change made after it, checked
//     node for node against a model of the policy. Besides the crossing
//     nodes, each scrape reports the period refresh of the nodes whose own
//     report period (cluster_node_usage_phase) turned since the previous
//     one: about nodeCount × metricsInterval / period of them.
//  2. Scrape write time, the timed loop: the server is stopped (its metrics
//     maintenance would drop the oldest partition at the hour), a day of
//     history (historySamples per node) is written into the registry's
//     hourly partitions and into a baseline database holding the schema and
//     writes of the design before commit fba8770 (legacyMetricsWriter);
//     after one untimed scrape on each side, each op writes one scrape to
//     both, in alternating order, and times each. ns/op is the new design's
//     write. Each op reports its share of the period refresh (and the
//     crossing nodes again when their period turns); at -benchtime 10x the
//     ops span one report period, so every node is refreshed once.
//  3. History size (after the seed) and prune: MaintainNodeMetrics dropping
//     the oldest whole hour against the old prune DELETE of the same rows,
//     prunedHours times.
func (d *discoveryEnv) benchMetricsQuietFleet(b *testing.B) {
	ctx := b.Context()
	if err := d.ensureMirrored(ctx); err != nil {
		b.Fatal(err)
	}
	f, err := d.newFleet(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var res metricsResult

	// Part 1: watch events.
	if res.scrapes, err = d.quietFleetEvents(ctx, f); err != nil {
		b.Fatal(err)
	}
	for i, s := range res.scrapes {
		if s.events != int(s.reported) || s.changeRows != s.reported || int(s.reported) != s.due || len(s.unexpected) > 0 {
			b.Errorf("scrape %d (%s): %d nodes reported, %d change-log rows, %d events, model %d due; unexpected events: %v",
				s.k, s.kind, s.reported, s.changeRows, s.events, s.due, s.unexpected)
		}
		// Each node refreshes at its own phase: a scrape refreshes about
		// expectedRefresh nodes, never the fleet at once.
		if i > 0 && float64(s.refresh) > 2*expectedRefresh() {
			b.Errorf("scrape %d (%s): the model refreshes %d nodes at once, want about %.0f (nodes × interval / period): the phases do not spread",
				s.k, s.kind, s.refresh, expectedRefresh())
		}
	}

	// Part 2: a day of history on both sides, then the timed loop.
	if err := d.cp.StopPlatformAPIServer(); err != nil {
		b.Fatal(err)
	}
	legacy, err := openLegacyMetrics(ctx, d.db, d.cp.DatabaseURL())
	if err != nil {
		b.Fatal(err)
	}
	defer legacy.close()
	if err := d.seedDayOfHistory(ctx, legacy, f, &res); err != nil {
		b.Fatal(err)
	}
	// One untimed scrape on each side first, as the other benchmarks warm
	// up: the seed and the vacuum have just pushed the tables a scrape
	// touches out of PostgreSQL's buffers.
	if err := d.warmUpScrape(ctx, f, legacy); err != nil {
		b.Fatal(err)
	}
	var newTotal, legacyTotal, quietTotal time.Duration
	for b.Loop() {
		b.StopTimer()
		k := d.scrapes
		d.scrapes++
		samples := f.samples(k)
		due := f.report(samples)
		legacyFirst := res.ops%2 == 0
		var legacyOp legacyScrape
		if legacyFirst {
			if legacyOp, err = legacy.scrape(ctx, samples); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		t0 := time.Now()
		rec, err := d.registry.RecordNodeMetrics(ctx, store.Fence{ClusterID: discoveryClusterID}, samples, usageReporting)
		took := time.Since(t0)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if !legacyFirst {
			if legacyOp, err = legacy.scrape(ctx, samples); err != nil {
				b.Fatal(err)
			}
		}
		if rec.Stored != nodeCount || rec.Reported != int64(len(due.nodes)) || legacyOp.inserted != nodeCount {
			b.Fatalf("scrape %d: new design stored %d and reported %d samples (model: %d due), today's design inserted %d; want %d stored",
				k, rec.Stored, rec.Reported, len(due.nodes), legacyOp.inserted, nodeCount)
		}
		fmt.Fprintf(os.Stderr, "discovery: scrape %d (%s): new design %s (%d reported), today's design %s (%d change-log rows)\n",
			k, due.kind, took.Round(time.Microsecond), rec.Reported, legacyOp.took.Round(time.Microsecond), legacyOp.changeRows)
		res.ops++
		newTotal += took
		legacyTotal += legacyOp.took
		res.legacyChangeRows = max(res.legacyChangeRows, legacyOp.changeRows)
		if rec.Reported == 0 {
			quietTotal += took
			res.quietOps++
		} else {
			res.reportingOps = append(res.reportingOps, reportingOp{reported: rec.Reported, took: took})
		}
		b.StartTimer()
	}
	res.newWrite = newTotal / time.Duration(res.ops)
	res.legacyWrite = legacyTotal / time.Duration(res.ops)
	if res.quietOps > 0 {
		res.newQuietWrite = quietTotal / time.Duration(res.quietOps)
	}

	// The quiet reference, untimed by b.
	if err := d.quietReference(ctx, f, legacy, &res); err != nil {
		b.Fatal(err)
	}

	// Part 3: prune.
	if err := d.pruneHistory(ctx, legacy, &res); err != nil {
		b.Fatal(err)
	}

	w := res.watchTotals()
	b.ReportMetric(float64(w.crossingEvents), "crossing-events")
	b.ReportMetric(w.meanRefreshEvents(), "refresh-events")
	b.ReportMetric(float64(w.maxRefreshEvents), "max-refresh-events")
	b.ReportMetric(float64(w.otherEvents), "other-events")
	b.ReportMetric(ms(res.newWrite), "new-ms")
	b.ReportMetric(ms(res.legacyWrite), "legacy-ms")
	b.ReportMetric(res.ratio(), "write-ratio")
	b.ReportMetric(ms(res.quietRefWrite), "quiet-ref-ms")
	b.ReportMetric(res.newBytesPerSample(), "new-B/sample")
	b.ReportMetric(res.legacyBytesPerSample(), "legacy-B/sample")
	b.ReportMetric(ms(res.newPrune), "new-prune-ms")
	b.ReportMetric(ms(res.legacyPrune), "legacy-prune-ms")
	discoveryResults.setMetrics(res)
}

// metricsResult is what the quiet-fleet benchmark measured.
type metricsResult struct {
	// scrapes: the watch part, the first (reporting) scrape included.
	scrapes []scrapeEvents

	// The timed loop: ops scrapes, their mean write in each design, the
	// mean of the new design's quiet ones (no node reported; none at the
	// default period, where every scrape refreshes some nodes) and each of
	// its reporting ones; legacyChangeRows is the most change-log rows one
	// of today's scrapes wrote.
	ops, quietOps         int
	newWrite, legacyWrite time.Duration
	newQuietWrite         time.Duration
	// The quiet reference: its scrapes and the new design's mean write.
	quietRefOps                     int
	quietRefWrite                   time.Duration
	reportingOps                    []reportingOp
	legacyChangeRows                int64
	newHistoryRows, legacyHistory   int64
	newSeed, legacySeed             time.Duration
	newBytes, legacyBytes           historySize
	newPrune, legacyPrune           time.Duration // the slowest of prunedHours
	prunedRows, prunedHoursMeasured int64
}

// watchTotals sums the watch part's scrapes after the first.
type watchTotals struct {
	scrapes int
	// exact: every scrape's Reported, change-log rows and events matched
	// the model, node for node (the first scrape included).
	exact bool
	// crossing: nodes the model reports for crossing the threshold, and
	// their events.
	crossing, crossingEvents int
	// The period refresh: nodes the model reports for a new period, their
	// events, and the fewest and most events of one scrape.
	refresh, refreshEvents             int
	minRefreshEvents, maxRefreshEvents int
	// otherEvents: events beyond the model's (0 when exact).
	otherEvents int
	// events and the servers' CPU time over these scrapes, the markers'
	// own events included in the CPU.
	events               int
	platformCPU, kubeCPU time.Duration
}

func (r metricsResult) watchTotals() watchTotals {
	t := watchTotals{exact: len(r.scrapes) > 0}
	for i, s := range r.scrapes {
		t.exact = t.exact && s.events == int(s.reported) && s.changeRows == s.reported && int(s.reported) == s.due && len(s.unexpected) == 0
		if i == 0 {
			continue
		}
		t.scrapes++
		t.crossing += s.crossing
		t.crossingEvents += s.byReason["threshold"]
		t.refresh += s.refresh
		t.refreshEvents += s.byReason["period"]
		if t.scrapes == 1 || s.byReason["period"] < t.minRefreshEvents {
			t.minRefreshEvents = s.byReason["period"]
		}
		t.maxRefreshEvents = max(t.maxRefreshEvents, s.byReason["period"])
		t.otherEvents += s.byReason[""]
		t.events += s.events
		t.platformCPU += s.platformCPU
		t.kubeCPU += s.kubeCPU
	}
	return t
}

func (t watchTotals) meanRefreshEvents() float64 {
	return float64(t.refreshEvents) / float64(max(t.scrapes, 1))
}

// expectedRefresh is how many nodes' report periods turn in a scrape
// interval on average: nodeCount × metricsInterval / period.
func expectedRefresh() float64 {
	return float64(nodeCount) * metricsInterval.Seconds() / usageReporting.Period.Seconds()
}

// reportingOp is a timed scrape of the new design that reported nodes.
type reportingOp struct {
	reported int64
	took     time.Duration
}

// historySize is the on-disk size of a metrics history after the seed.
type historySize struct {
	table, indexes int64
	rows           int64
}

func (h historySize) total() int64 { return h.table + h.indexes }

func (r metricsResult) ratio() float64 {
	if r.legacyWrite == 0 {
		return 0
	}
	return float64(r.newWrite) / float64(r.legacyWrite)
}

func (r metricsResult) newBytesPerSample() float64 {
	return float64(r.newBytes.total()) / float64(max(r.newBytes.rows, 1))
}

func (r metricsResult) legacyBytesPerSample() float64 {
	return float64(r.legacyBytes.total()) / float64(max(r.legacyBytes.rows, 1))
}

// ensureMirrored makes sure the server runs and the registry mirrors the
// member, as the sub-benchmarks before this one leave it. Run on its own
// (-bench BenchmarkDiscovery/metrics), the server is stopped with only the
// near-empty first sync in the registry; it then syncs as initial-sync does.
func (d *discoveryEnv) ensureMirrored(ctx context.Context) error {
	if d.cp.PlatformAPIServerPID() != 0 {
		if c, err := d.registryCounts(ctx); err == nil && c == d.want {
			return nil
		}
	}
	fmt.Fprintf(os.Stderr, "discovery: the registry does not mirror the member; syncing it first\n")
	if err := d.cp.StopPlatformAPIServer(); err != nil {
		return err
	}
	if err := d.removeMember(ctx); err != nil {
		return err
	}
	start, err := d.startAndWaitSynced(ctx)
	if err != nil {
		return err
	}
	return start.wait(ctx)
}

// fleet generates the scrapes and models the reporting policy: it knows, for
// each node, the sample NodeCapacity shows, and so which nodes a scrape must
// report (and nothing else may change).
type fleet struct {
	// base is when scrape 0 was observed; scrape k is k intervals later.
	base        time.Time
	allocatable []store.Resources
	// phase is each node's offset into the report period, in seconds, as
	// the registry computes it (cluster_node_usage_phase).
	phase    []float64
	reported []store.NodeMetricsSample // ObservedAt zero: none
}

// newFleet reads each node's allocatable from the registry (discovery
// mirrored it from kube-apiserver) and checks that no node reports usage
// yet: the environment has no metrics.k8s.io.
func (d *discoveryEnv) newFleet(ctx context.Context) (*fleet, error) {
	f := &fleet{
		base:        time.Now().UTC().Truncate(time.Second),
		allocatable: make([]store.Resources, nodeCount),
		phase:       make([]float64, nodeCount),
		reported:    make([]store.NodeMetricsSample, nodeCount),
	}
	rows, err := d.db.Query(ctx, `
		SELECT name, allocatable_cpu_millis, allocatable_memory_bytes, usage_observed_at IS NOT NULL,
			cluster_node_usage_phase(cluster_id, name, $2)::float8
		FROM cluster_node WHERE cluster_id = $1`, discoveryClusterID, usageReporting.Period.Seconds())
	if err != nil {
		return nil, fmt.Errorf("read allocatable: %w", err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var name string
		var cpu, mem int64
		var usage bool
		var phase float64
		if err := rows.Scan(&name, &cpu, &mem, &usage, &phase); err != nil {
			return nil, err
		}
		i, err := strconv.Atoi(strings.TrimPrefix(name, "node-"))
		if err != nil || i < 0 || i >= nodeCount || nodeName(i) != name {
			return nil, fmt.Errorf("unexpected node %q in the registry", name)
		}
		if usage {
			return nil, fmt.Errorf("node %s already reports usage; the discovery environment has no metrics.k8s.io", name)
		}
		f.allocatable[i] = store.Resources{CPUMillis: cpu, MemoryBytes: mem}
		f.phase[i] = phase
		seen++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if seen != nodeCount {
		return nil, fmt.Errorf("%d nodes in the registry, want %d", seen, nodeCount)
	}
	return f, nil
}

func crossing(i int) bool { return i%crossingEvery == crossingEvery/2 }

// samples is scrape k: node i at its level (20–69 % of allocatable CPU,
// 30–69 % of memory), jittered by up to ±usageJitter, plus crossingStep
// from scrape crossingScrape on for the crossing nodes.
func (f *fleet) samples(k int) []store.NodeMetricsSample {
	observed := f.base.Add(time.Duration(k) * metricsInterval)
	out := make([]store.NodeMetricsSample, nodeCount)
	for i := range out {
		jitter := float64((i*31+k*17)%21-10) / 10 * usageJitter
		cpu := 0.20 + float64(i%50)/100 + jitter
		mem := 0.30 + float64(i%40)/100 - jitter
		if crossing(i) && k >= crossingScrape {
			cpu += crossingStep
			mem += crossingStep
		}
		a := f.allocatable[i]
		out[i] = store.NodeMetricsSample{
			ClusterID:    discoveryClusterID,
			Node:         nodeName(i),
			CPUNanoCores: int64(cpu * float64(a.CPUMillis) * 1e6),
			MemoryBytes:  int64(mem * float64(a.MemoryBytes)),
			ObservedAt:   observed,
			Window:       20 * time.Second,
		}
	}
	return out
}

// dueNodes is what the policy reports of a scrape: the nodes, each with
// why ("first", "threshold" or "period"; a node both past the threshold and
// in a new period counts as "threshold"), and the scrape's kind ("quiet"
// when none; else the reasons joined by "+").
type dueNodes struct {
	nodes map[string]string
	kind  string
}

// count is how many nodes are due for reason why.
func (d dueNodes) count(why string) int {
	n := 0
	for _, w := range d.nodes {
		if w == why {
			n++
		}
	}
	return n
}

// report applies the policy (store.UsageReporting, as RecordNodeMetrics
// does in SQL) to a scrape and remembers what it reports.
func (f *fleet) report(samples []store.NodeMetricsSample) dueNodes {
	out := dueNodes{nodes: map[string]string{}}
	reasons := map[string]bool{}
	for i, s := range samples {
		r, a := f.reported[i], f.allocatable[i]
		var why string
		switch {
		case r.ObservedAt.IsZero():
			why = "first"
		case !s.ObservedAt.After(r.ObservedAt):
			continue
		case abs(s.CPUNanoCores-r.CPUNanoCores) > int64(usageReporting.Threshold*float64(a.CPUMillis)*1e6),
			abs(s.MemoryBytes-r.MemoryBytes) > int64(usageReporting.Threshold*float64(a.MemoryBytes)):
			why = "threshold"
		case f.period(i, s.ObservedAt) > f.period(i, r.ObservedAt):
			why = "period"
		default:
			continue
		}
		reasons[why] = true
		out.nodes[nodecapacity.Name(s.ClusterID, s.Node)] = why
		f.reported[i] = s
	}
	var kinds []string
	for _, why := range []string{"first", "threshold", "period"} {
		if reasons[why] {
			kinds = append(kinds, why)
		}
	}
	out.kind = "quiet"
	if len(kinds) > 0 {
		out.kind = strings.Join(kinds, "+")
	}
	return out
}

// period numbers node i's report period that t falls in.
func (f *fleet) period(i int, t time.Time) float64 {
	return math.Floor((float64(t.UnixMicro())/1e6 + f.phase[i]) / usageReporting.Period.Seconds())
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// scrapeEvents is one scrape of the watch part.
type scrapeEvents struct {
	k    int
	kind string
	// due is how many nodes the model says the scrape reports, crossing
	// and refresh how many of them for crossing the threshold and for a new
	// period; reported is what RecordNodeMetrics says it did.
	due, crossing, refresh int
	stored, reported       int64
	// changeRows: registry_change entries of NodeCapacities the scrape
	// wrote (the member's ClusterCapacity takes one more when any is).
	changeRows int64
	// events: NodeCapacity events the watch delivered before the marker;
	// byReason counts them by the model's reason for their node ("" for
	// other events: of a node the model did not report, or a second one of
	// a node); unexpected lists those other events (at most 5).
	events     int
	byReason   map[string]int
	unexpected []string
	write      time.Duration
	// CPU time of the platform-apiserver and kube-apiserver from the
	// scrape until the marker's event arrived (the marker's own change
	// included; 10 ms resolution).
	platformCPU, kubeCPU time.Duration
}

// quietFleetEvents is part 1: the first scrape and quietFleetScrapes more,
// each followed by the marker, counting what reaches the watch.
func (d *discoveryEnv) quietFleetEvents(ctx context.Context, f *fleet) ([]scrapeEvents, error) {
	w, err := d.watchNodeCapacities(ctx)
	if err != nil {
		return nil, err
	}
	defer w.close()
	platformPID := d.cp.PlatformAPIServerPID()
	kubePID, err := d.kubeAPIServerPID()
	if err != nil {
		return nil, err
	}
	// The first marker proves the watch is established.
	marker := 0
	if _, _, _, err := d.awaitMetricsMarker(ctx, w, marker, nil); err != nil {
		return nil, fmt.Errorf("first marker: %w", err)
	}
	var out []scrapeEvents
	for range quietFleetScrapes + 1 {
		k := d.scrapes
		d.scrapes++
		samples := f.samples(k)
		due := f.report(samples)
		s := scrapeEvents{k: k, kind: due.kind, due: len(due.nodes), crossing: due.count("threshold"), refresh: due.count("period")}
		var rvBefore int64
		if err := d.db.QueryRow(ctx, `SELECT resource_version FROM registry_state`).Scan(&rvBefore); err != nil {
			return nil, err
		}
		platformBefore, err := processCPUTime(platformPID)
		if err != nil {
			return nil, err
		}
		kubeBefore, err := processCPUTime(kubePID)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		rec, err := d.registry.RecordNodeMetrics(ctx, store.Fence{ClusterID: discoveryClusterID}, samples, usageReporting)
		s.write = time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("scrape %d: %w", k, err)
		}
		s.stored, s.reported = rec.Stored, rec.Reported
		if err := d.db.QueryRow(ctx, `SELECT count(*) FROM registry_change WHERE resource_version > $1 AND kind = 'NodeCapacity'`, rvBefore).Scan(&s.changeRows); err != nil {
			return nil, err
		}
		marker++
		s.events, s.byReason, s.unexpected, err = d.awaitMetricsMarker(ctx, w, marker, due.nodes)
		if err != nil {
			return nil, fmt.Errorf("scrape %d: %w", k, err)
		}
		platformAfter, err := processCPUTime(platformPID)
		if err != nil {
			return nil, err
		}
		kubeAfter, err := processCPUTime(kubePID)
		if err != nil {
			return nil, err
		}
		s.platformCPU, s.kubeCPU = platformAfter-platformBefore, kubeAfter-kubeBefore
		fmt.Fprintf(os.Stderr, "discovery: scrape %d (%s): stored %d, reported %d (model %d: %d crossing, %d period refresh), %d change-log rows, %d watch events (%d crossing, %d refresh, %d other), write %s, CPU platform %s kube %s\n",
			k, s.kind, s.stored, s.reported, s.due, s.crossing, s.refresh, s.changeRows, s.events, s.byReason["threshold"], s.byReason["period"], s.byReason[""],
			s.write.Round(time.Microsecond), s.platformCPU, s.kubeCPU)
		out = append(out, s)
	}
	return out, nil
}

// awaitMetricsMarker sets the marker label of the marker node to seq in
// kube-apiserver and reads the watch until discovery's event of it arrives.
// It returns how many other events came first, how many of them were of a
// node in want by its reason there ("" for the others: of a node not in
// want, or a node's second; want nil: expect none), and which were others.
func (d *discoveryEnv) awaitMetricsMarker(ctx context.Context, w *ncWatch, seq int, want map[string]string) (int, map[string]int, []string, error) {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, metricsMarkerLabel, strconv.Itoa(seq))
	node := nodeName(metricsMarkerNode)
	if _, err := d.kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return 0, nil, nil, fmt.Errorf("label node %s: %w", node, err)
	}
	markerName := nodecapacity.Name(discoveryClusterID, node)
	timer := time.NewTimer(metricsMarkerTimeout)
	defer timer.Stop()
	events := 0
	byReason := map[string]int{}
	var unexpected []string
	seen := map[string]bool{}
	for {
		select {
		case r := <-w.receipts:
			if r.err != nil {
				return events, byReason, unexpected, r.err
			}
			if r.name == markerName && r.marker == strconv.Itoa(seq) {
				return events, byReason, unexpected, nil
			}
			events++
			why := want[r.name]
			if seen[r.name] {
				why = ""
			}
			byReason[why]++
			if why == "" && len(unexpected) < 5 {
				unexpected = append(unexpected, string(r.typ)+" "+r.name)
			}
			seen[r.name] = true
		case <-timer.C:
			return events, byReason, unexpected, fmt.Errorf("no event of marker %d on %s within %s (%d other events)", seq, markerName, metricsMarkerTimeout, events)
		case <-ctx.Done():
			return events, byReason, unexpected, ctx.Err()
		}
	}
}

// ncWatch is one watch of every NodeCapacity through the aggregator and the
// goroutine that reads it.
type ncWatch struct {
	w         watch.Interface
	transport http.RoundTripper
	receipts  chan ncReceipt
	done      chan struct{}
	wg        sync.WaitGroup
}

// ncReceipt is one event (the object's name and marker label), or the error
// that ended the watch.
type ncReceipt struct {
	typ    watch.EventType
	name   string
	marker string
	err    error
}

// watchNodeCapacities opens a watch of NodeCapacities from now, on a
// connection of its own (env.watchClient).
func (d *discoveryEnv) watchNodeCapacities(ctx context.Context) (*ncWatch, error) {
	c, rt, err := d.watchClient()
	if err != nil {
		return nil, err
	}
	list, err := c.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("list NodeCapacities for a resourceVersion: %w", err)
	}
	w, err := c.PlatformV1alpha1().NodeCapacities().Watch(ctx, metav1.ListOptions{
		ResourceVersion:     list.ResourceVersion,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      new(watchRequestTimeout),
	})
	if err != nil {
		return nil, fmt.Errorf("watch NodeCapacities: %w", err)
	}
	// Room for several scrapes' events: the reader never blocks.
	nw := &ncWatch{w: w, transport: rt, receipts: make(chan ncReceipt, 4*nodeCount), done: make(chan struct{})}
	nw.wg.Add(1)
	go nw.follow()
	return nw, nil
}

func (nw *ncWatch) follow() {
	defer nw.wg.Done()
	for ev := range nw.w.ResultChan() {
		switch ev.Type {
		case watch.Bookmark:
			continue
		case watch.Error:
			nw.send(ncReceipt{err: fmt.Errorf("watch error: %w", apierrors.FromObject(ev.Object))})
			return
		}
		nc, ok := ev.Object.(*v1alpha1.NodeCapacity)
		if !ok {
			nw.send(ncReceipt{err: fmt.Errorf("%s event with a %T", ev.Type, ev.Object)})
			return
		}
		if !nw.send(ncReceipt{typ: ev.Type, name: nc.Name, marker: nc.Labels[metricsMarkerLabel]}) {
			return
		}
	}
	nw.send(ncReceipt{err: errors.New("watch ended")})
}

func (nw *ncWatch) send(r ncReceipt) bool {
	select {
	case nw.receipts <- r:
		return true
	case <-nw.done:
		return false
	}
}

func (nw *ncWatch) close() {
	close(nw.done)
	nw.w.Stop()
	nw.wg.Wait()
	utilnet.CloseIdleConnectionsFor(nw.transport)
}

// legacyMetrics is the baseline database and today's design's writer on it.
type legacyMetrics struct {
	// admin is a connection to the registry's database, which creates and
	// drops the baseline's.
	admin  *pgxpool.Pool
	store  *postgres.Store
	writer *legacyMetricsWriter
}

// openLegacyMetrics creates the baseline database in the PostgreSQL server
// of the registry (admin, at registryURL), migrates it to migration 003
// (the unpartitioned history with its observed_at index) and applies the
// member's nodes to it: the same nodeCount nodes with podsPerSyncNode pods
// each, as the registry holds them.
func openLegacyMetrics(ctx context.Context, admin *pgxpool.Pool, registryURL string) (*legacyMetrics, error) {
	if _, err := admin.Exec(ctx, `DROP DATABASE IF EXISTS `+legacyMetricsDatabase); err != nil {
		return nil, fmt.Errorf("drop the baseline database: %w", err)
	}
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+legacyMetricsDatabase); err != nil {
		return nil, fmt.Errorf("create the baseline database: %w", err)
	}
	u, err := url.Parse(registryURL)
	if err != nil {
		return nil, fmt.Errorf("parse the registry's database URL: %w", err)
	}
	u.Path = "/" + legacyMetricsDatabase
	l := &legacyMetrics{admin: admin}
	if l.store, err = postgres.Open(ctx, u.String(), postgres.Options{}); err != nil {
		return nil, err
	}
	if l.writer, err = newLegacyMetricsWriter(ctx, u.String()); err != nil {
		l.store.Close()
		return nil, err
	}
	if err := l.store.Migrate(ctx); err != nil {
		l.close()
		return nil, fmt.Errorf("migrate the baseline database: %w", err)
	}
	if err := l.store.MigrateDownTo(ctx, legacyMetricsMigration); err != nil {
		l.close()
		return nil, fmt.Errorf("revert the baseline database to migration %03d: %w", legacyMetricsMigration, err)
	}
	var kind string
	if err := l.writer.pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE oid = 'cluster_node_metrics'::regclass`).Scan(&kind); err != nil {
		l.close()
		return nil, fmt.Errorf("the baseline's cluster_node_metrics: %w", err)
	}
	if kind != "r" {
		l.close()
		return nil, fmt.Errorf("the baseline's cluster_node_metrics is of relkind %q, want an ordinary table", kind)
	}
	batch := registryBatch(time.Now().UTC().Truncate(time.Second))
	batch.ClusterID = discoveryClusterID
	for i := range nodeCount {
		for p := podsPerNode; p < podsPerSyncNode; p++ {
			batch.Pods = append(batch.Pods, store.Pod{
				Namespace:          batch.Namespaces[(i+p)%namespaceCount].Name,
				Name:               fmt.Sprintf("app-%05d-%d", i, p),
				UID:                fmt.Sprintf("pod-%05d-%d", i, p),
				NodeName:           nodeName(i),
				Phase:              "Running",
				CPURequestMillis:   int64(100 + 150*((i+p)%4)),
				MemoryRequestBytes: int64(128+256*((i+p)%4)) * mi,
			})
		}
	}
	if err := l.store.Apply(ctx, batch); err != nil {
		l.close()
		return nil, fmt.Errorf("apply the nodes to the baseline database: %w", err)
	}
	return l, nil
}

// close closes the baseline's connections and drops its database.
func (l *legacyMetrics) close() {
	if l.writer != nil {
		l.writer.pool.Close()
	}
	l.store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := l.admin.Exec(ctx, `DROP DATABASE IF EXISTS `+legacyMetricsDatabase); err != nil {
		fmt.Fprintf(os.Stderr, "discovery: drop the baseline database: %v\n", err)
	}
}

// legacyScrape is one scrape written by today's design.
type legacyScrape struct {
	inserted, changeRows int64
	took                 time.Duration
}

// scrape writes samples as today's design does and times it; untimed, it
// counts the change-log rows the write added.
func (l *legacyMetrics) scrape(ctx context.Context, samples []store.NodeMetricsSample) (legacyScrape, error) {
	var out legacyScrape
	var rvBefore int64
	if err := l.writer.pool.QueryRow(ctx, `SELECT resource_version FROM registry_state`).Scan(&rvBefore); err != nil {
		return out, err
	}
	t0 := time.Now()
	inserted, err := l.writer.InsertNodeMetrics(ctx, samples)
	out.took = time.Since(t0)
	if err != nil {
		return out, fmt.Errorf("today's design: %w", err)
	}
	out.inserted = inserted
	err = l.writer.pool.QueryRow(ctx, `SELECT count(*) FROM registry_change WHERE resource_version > $1 AND kind = 'NodeCapacity'`, rvBefore).Scan(&out.changeRows)
	return out, err
}

// seedHistorySQL writes $4 samples per node of cluster $1, one interval ($3
// seconds) apart and ending one interval before $2, in time order (as
// scrapes write them: each a sample of every node, by name), in one
// statement. Usage is some fraction of allocatable; its values do not
// matter to any statement measured.
const seedHistorySQL = `
	INSERT INTO cluster_node_metrics (cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at, window_seconds)
	SELECT n.cluster_id, n.name, n.allocatable_cpu_millis * (200000 + (i * 7919) % 500000),
	       n.allocatable_memory_bytes * (30 + (i * 104729) % 40) / 100,
	       $2::timestamptz - make_interval(secs => i * $3::float8), 20
	FROM generate_series($4::int, 1, -1) AS i,
	     LATERAL (SELECT cluster_id, name, allocatable_cpu_millis, allocatable_memory_bytes
	              FROM cluster_node WHERE cluster_id = $1 AND i > 0 ORDER BY name) n`

// seedDayOfHistory writes historySamples per node, ending one interval
// before the first scrape, into the registry's hourly partitions and into
// the baseline's table, vacuums and analyzes both (as autovacuum would have
// long since), and measures each one's size.
func (d *discoveryEnv) seedDayOfHistory(ctx context.Context, legacy *legacyMetrics, f *fleet, res *metricsResult) error {
	end := f.base
	if _, err := d.db.Exec(ctx, `SELECT cluster_node_metrics_ensure_partitions($1, $2)`,
		end.Add(-time.Duration(historySamples)*metricsInterval), end); err != nil {
		return fmt.Errorf("create the history's partitions: %w", err)
	}
	seed := func(name string, exec func(context.Context, string, ...any) (int64, error), rows *int64, took *time.Duration) error {
		fmt.Fprintf(os.Stderr, "discovery: writing %d samples per node (%s of history) into %s...\n", historySamples, metricsRetention, name)
		stop := heartbeat("writing the history into " + name)
		begin := time.Now()
		n, err := exec(ctx, seedHistorySQL, discoveryClusterID, end, metricsInterval.Seconds(), historySamples)
		if err == nil {
			_, err = exec(ctx, `VACUUM (ANALYZE) cluster_node_metrics`)
		}
		stop()
		if err != nil {
			return fmt.Errorf("seed the history of %s: %w", name, err)
		}
		if n != int64(historySamples)*nodeCount {
			return fmt.Errorf("seeded %d samples into %s, want %d", n, name, historySamples*nodeCount)
		}
		*rows, *took = n, time.Since(begin)
		fmt.Fprintf(os.Stderr, "discovery: %d samples written into %s, vacuumed and analyzed in %s\n", n, name, took.Round(time.Second))
		return nil
	}
	if err := seed("the registry (new design)", poolExec(d.db), &res.newHistoryRows, &res.newSeed); err != nil {
		return err
	}
	if err := seed("the baseline (today's design)", poolExec(legacy.writer.pool), &res.legacyHistory, &res.legacySeed); err != nil {
		return err
	}
	var err error
	if res.newBytes, err = historySizeOf(ctx, d.db, `SELECT name FROM cluster_node_metrics_partitions()`); err != nil {
		return err
	}
	if res.legacyBytes, err = historySizeOf(ctx, legacy.writer.pool, `SELECT 'cluster_node_metrics'`); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "discovery: history size: new design %s in partitions (%s table, %s indexes) for %d samples, today's design %s (%s table, %s indexes) for %d\n",
		mibString(res.newBytes.total()), mibString(res.newBytes.table), mibString(res.newBytes.indexes), res.newBytes.rows,
		mibString(res.legacyBytes.total()), mibString(res.legacyBytes.table), mibString(res.legacyBytes.indexes), res.legacyBytes.rows)
	return nil
}

// poolExec runs a statement on pool and returns the rows it affected.
func poolExec(pool *pgxpool.Pool) func(context.Context, string, ...any) (int64, error) {
	return func(ctx context.Context, sql string, args ...any) (int64, error) {
		tag, err := pool.Exec(ctx, sql, args...)
		return tag.RowsAffected(), err
	}
}

// heartbeat prints that what is still going on every 30 s until stopped,
// for the minutes-long seed statements.
func heartbeat(what string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		begin := time.Now()
		tick := time.NewTicker(30 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				fmt.Fprintf(os.Stderr, "discovery: still %s (%s)\n", what, time.Since(begin).Round(time.Second))
			case <-done:
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// historySizeOf sums the table (heap, TOAST, free space and visibility
// maps) and index sizes of the relations namesSQL lists, and counts the
// history's rows.
func historySizeOf(ctx context.Context, pool *pgxpool.Pool, namesSQL string) (historySize, error) {
	var h historySize
	err := pool.QueryRow(ctx, `
		SELECT coalesce(sum(pg_table_size(t.name::regclass)), 0)::int8, coalesce(sum(pg_indexes_size(t.name::regclass)), 0)::int8,
		       (SELECT count(*) FROM cluster_node_metrics)
		FROM (`+namesSQL+`) AS t(name)`).Scan(&h.table, &h.indexes, &h.rows)
	if err != nil {
		return h, fmt.Errorf("measure the metrics history: %w", err)
	}
	return h, nil
}

func mibString(bytes int64) string { return fmt.Sprintf("%.0f MiB", float64(bytes)/mib) }

// pruneHistory is part 3: prunedHours times, the registry's oldest hourly
// partition is dropped by MaintainNodeMetrics (with RetainAfter its upper
// bound, as the maintenance does once the hour is older than the
// retention) and the same samples are deleted from the baseline by today's
// prune. The history's first hour is partial unless the first scrape was
// on the hour; it is pruned first on both sides, untimed.
func (d *discoveryEnv) pruneHistory(ctx context.Context, legacy *legacyMetrics, res *metricsResult) error {
	// The maintenance prepares the coming hours' partitions every interval;
	// a first untimed round does that, so the timed ones only drop.
	if _, err := d.registry.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: time.Now()}); err != nil {
		return err
	}
	for res.prunedHoursMeasured < prunedHours {
		var name string
		var upper time.Time
		if err := d.db.QueryRow(ctx, `SELECT name, upper_bound FROM cluster_node_metrics_partitions() ORDER BY upper_bound LIMIT 1`).Scan(&name, &upper); err != nil {
			return fmt.Errorf("find the oldest history partition: %w", err)
		}
		var rows int64
		if err := d.db.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{name}.Sanitize()).Scan(&rows); err != nil {
			return fmt.Errorf("count the samples of %s: %w", name, err)
		}
		t0 := time.Now()
		done, err := d.registry.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: time.Now(), RetainAfter: upper})
		newTook := time.Since(t0)
		if err != nil {
			return err
		}
		t0 = time.Now()
		deleted, err := legacy.writer.PruneNodeMetrics(ctx, upper)
		legacyTook := time.Since(t0)
		if err != nil {
			return err
		}
		if done.DroppedPartitions != 1 || deleted != rows {
			return fmt.Errorf("prune before %s: new design dropped %d partitions (want 1, %s with %d samples), today's design deleted %d samples",
				upper, done.DroppedPartitions, name, rows, deleted)
		}
		if rows != int64(samplesPerHour)*nodeCount {
			fmt.Fprintf(os.Stderr, "discovery: pruned the history's partial first hour (%d samples), untimed: new design %s, today's design %s\n",
				rows, newTook.Round(time.Microsecond), legacyTook.Round(time.Millisecond))
			continue
		}
		fmt.Fprintf(os.Stderr, "discovery: pruned an hour (%d samples, before %s): new design %s (dropped %s), today's design %s\n",
			rows, upper.UTC().Format(time.RFC3339), newTook.Round(time.Microsecond), name, legacyTook.Round(time.Millisecond))
		res.prunedRows = rows
		res.newPrune = max(res.newPrune, newTook)
		res.legacyPrune = max(res.legacyPrune, legacyTook)
		res.prunedHoursMeasured++
	}
	return nil
}

// quietReference writes quietReferenceScrapes scrapes to both sides, as the
// timed loop does (alternating order), but with a report period so long
// that no node's turns: the new design's scrapes are quiet (no node due, so
// no report and no writers' lock). Their mean, against the loop's, gives
// the write cost of the period refresh. The fleet's model is not updated
// (nothing is reported); nothing after this uses it.
func (d *discoveryEnv) quietReference(ctx context.Context, f *fleet, legacy *legacyMetrics, res *metricsResult) error {
	policy := store.UsageReporting{Threshold: usageReporting.Threshold, Period: quietReferencePeriod}
	var total time.Duration
	for i := range quietReferenceScrapes {
		k := d.scrapes
		d.scrapes++
		samples := f.samples(k)
		legacyFirst := i%2 == 0
		var op legacyScrape
		var err error
		if legacyFirst {
			if op, err = legacy.scrape(ctx, samples); err != nil {
				return err
			}
		}
		t0 := time.Now()
		rec, err := d.registry.RecordNodeMetrics(ctx, store.Fence{ClusterID: discoveryClusterID}, samples, policy)
		took := time.Since(t0)
		if err != nil {
			return err
		}
		if !legacyFirst {
			if op, err = legacy.scrape(ctx, samples); err != nil {
				return err
			}
		}
		if rec.Stored != nodeCount || rec.Reported != 0 || op.inserted != nodeCount {
			return fmt.Errorf("quiet reference scrape %d: new design stored %d and reported %d samples, today's design inserted %d; want %d stored and none reported",
				k, rec.Stored, rec.Reported, op.inserted, nodeCount)
		}
		fmt.Fprintf(os.Stderr, "discovery: scrape %d (quiet reference, period %s): new design %s (0 reported), today's design %s\n",
			k, quietReferencePeriod, took.Round(time.Microsecond), op.took.Round(time.Microsecond))
		total += took
	}
	res.quietRefOps = quietReferenceScrapes
	res.quietRefWrite = total / quietReferenceScrapes
	return nil
}

// refreshCostPerNode is the new design's write time per reported node: the
// timed loop's mean less the quiet reference's, over the loop's mean
// reported nodes (0 when either is missing).
func (r metricsResult) refreshCostPerNode() time.Duration {
	var nodes int64
	for _, op := range r.reportingOps {
		nodes += op.reported
	}
	if r.quietRefOps == 0 || r.ops == 0 || nodes == 0 {
		return 0
	}
	return (r.newWrite - r.quietRefWrite) * time.Duration(r.ops) / time.Duration(nodes)
}

// warmUpScrape writes one scrape to both sides, untimed.
func (d *discoveryEnv) warmUpScrape(ctx context.Context, f *fleet, legacy *legacyMetrics) error {
	k := d.scrapes
	d.scrapes++
	samples := f.samples(k)
	due := f.report(samples)
	rec, err := d.registry.RecordNodeMetrics(ctx, store.Fence{ClusterID: discoveryClusterID}, samples, usageReporting)
	if err != nil {
		return err
	}
	op, err := legacy.scrape(ctx, samples)
	if err != nil {
		return err
	}
	if rec.Stored != nodeCount || rec.Reported != int64(len(due.nodes)) || op.inserted != nodeCount {
		return fmt.Errorf("warm-up scrape %d: new design stored %d and reported %d (model: %d due), today's design inserted %d; want %d stored",
			k, rec.Stored, rec.Reported, len(due.nodes), op.inserted, nodeCount)
	}
	fmt.Fprintf(os.Stderr, "discovery: scrape %d (%s, warm-up, untimed): new design %d reported, today's design %s\n", k, due.kind, rec.Reported, op.took.Round(time.Millisecond))
	return nil
}
