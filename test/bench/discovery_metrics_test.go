package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/discovery"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// The quiet-fleet benchmark (issue "A quiet fleet stays quiet"): what a
// metrics scrape of nodeCount nodes writes and sends to watchers when usage
// does not move, what writing it costs, and what a day of history costs to
// keep and to prune. (The comparison with the design before fba8770 that
// docs/benchmarks.md records was made by code removed since; see there.) See docs/benchmarks.md,
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
	// prunedHours hourly partitions (an hour of samples each) are dropped,
	// one at a time, in the prune part.
	prunedHours = 2
	// quietReferenceScrapes scrapes follow the timed loop, written with
	// quietReferencePeriod instead of the default period: no node comes
	// due, so they time the new design's quiet scrape on the same history
	// (not part of ns/op). With a period of 200 years no node's period
	// turns before 2169 (phases are under 50 days).
	quietReferenceScrapes = 6
	quietReferencePeriod  = 200 * 365 * 24 * time.Hour
)

// usageReporting is the policy the scraper uses by default
// (--usage-report-threshold, --usage-report-period).
var usageReporting = discovery.DefaultConfig().Metrics.UsageReporting

// benchMetricsQuietFleet measures a quiet fleet's metrics, every scrape a
// sample of each of the member's nodes one metricsInterval after the last,
// written as the scraper writes them (RecordNodeMetrics, default policy):
//  1. watch events, untimed: per scrape, the change-log rows and the events
//     a watch delivers before a marker change, node for node against a
//     model of the policy (a first scrape, then quietFleetScrapes with one
//     crossing scrape and each node's period refresh at its own phase);
//  2. the timed loop, server stopped, on a day of history in the hourly
//     partitions: one scrape per op, then the quiet reference;
//  3. the history's size, and the prune of an hour, prunedHours times.
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

	// Part 2: a day of history, then the timed loop.
	if err := d.cp.StopPlatformAPIServer(); err != nil {
		b.Fatal(err)
	}
	if err := d.seedDayOfHistory(ctx, f, &res); err != nil {
		b.Fatal(err)
	}
	// One untimed scrape first, as the other benchmarks warm up: the seed
	// and the vacuum have just pushed the tables a scrape touches out of
	// PostgreSQL's buffers.
	if _, err := d.scrape(ctx, f, usageReporting, nil); err != nil {
		b.Fatal(err)
	}
	var total, quietTotal time.Duration
	for b.Loop() {
		b.StopTimer()
		took, err := d.scrape(ctx, f, usageReporting, b)
		if err != nil {
			b.Fatal(err)
		}
		res.ops++
		total += took.took
		if took.reported == 0 {
			quietTotal += took.took
			res.quietOps++
		} else {
			res.reportingOps = append(res.reportingOps, took)
		}
		b.StartTimer()
	}
	res.newWrite = total / time.Duration(res.ops)
	if res.quietOps > 0 {
		res.newQuietWrite = quietTotal / time.Duration(res.quietOps)
	}

	// The quiet reference, untimed by b: a report period so long that no
	// node's turns, so no scrape reports. Its mean, against the loop's,
	// gives the write cost of the period refresh. The fleet's model is not
	// updated (nothing is reported); nothing after this uses it.
	quiet := store.UsageReporting{Threshold: usageReporting.Threshold, Period: quietReferencePeriod}
	for range quietReferenceScrapes {
		op, err := d.scrape(ctx, f, quiet, nil)
		if err != nil {
			b.Fatal(err)
		}
		res.quietRefWrite += op.took / quietReferenceScrapes
	}
	res.quietRefOps = quietReferenceScrapes

	// Part 3: prune.
	if err := d.pruneHistory(ctx, &res); err != nil {
		b.Fatal(err)
	}

	w := res.watchTotals()
	b.ReportMetric(float64(w.crossingEvents), "crossing-events")
	b.ReportMetric(w.meanRefreshEvents(), "refresh-events")
	b.ReportMetric(float64(w.maxRefreshEvents), "max-refresh-events")
	b.ReportMetric(float64(w.otherEvents), "other-events")
	b.ReportMetric(ms(res.newWrite), "new-ms")
	b.ReportMetric(ms(res.quietRefWrite), "quiet-ref-ms")
	b.ReportMetric(res.newBytesPerSample(), "new-B/sample")
	b.ReportMetric(ms(res.newPrune), "new-prune-ms")
	res.summarize()
}

// scrape writes the next scrape with policy, times it (by timed's clock
// too, when set) and checks it against the fleet's model, which it updates
// unless policy is the quiet reference's.
func (d *discoveryEnv) scrape(ctx context.Context, f *fleet, policy store.UsageReporting, timed *testing.B) (reportingOp, error) {
	k := d.scrapes
	d.scrapes++
	samples := f.samples(k)
	want, kind := int64(0), "quiet"
	if policy == usageReporting {
		due := f.report(samples)
		want, kind = int64(len(due.nodes)), due.kind
	}
	if timed != nil {
		timed.StartTimer()
	}
	t0 := time.Now()
	rec, err := d.registry.RecordNodeMetrics(ctx, store.Fence{ClusterID: discoveryClusterID}, samples, policy)
	op := reportingOp{reported: rec.Reported, took: time.Since(t0)}
	if timed != nil {
		timed.StopTimer()
	}
	if err != nil {
		return op, fmt.Errorf("scrape %d: %w", k, err)
	}
	if rec.Stored != nodeCount || rec.Reported != want {
		return op, fmt.Errorf("scrape %d (%s): stored %d and reported %d samples; want %d stored, %d reported", k, kind, rec.Stored, rec.Reported, nodeCount, want)
	}
	if timed == nil {
		kind += ", untimed"
	}
	fmt.Fprintf(os.Stderr, "discovery: scrape %d (%s): %s, %d reported\n", k, kind, op.took.Round(time.Microsecond), rec.Reported)
	return op, nil
}

// metricsResult is what the quiet-fleet benchmark measured.
type metricsResult struct {
	// scrapes: the watch part, the first (reporting) scrape included.
	scrapes []scrapeEvents
	// The timed loop: ops scrapes, their mean write, the mean of the quiet
	// ones (no node reported; none at the default period, where every
	// scrape refreshes some nodes) and each of the reporting ones.
	ops, quietOps           int
	newWrite, newQuietWrite time.Duration
	reportingOps            []reportingOp
	// The quiet reference: its scrapes and their mean write.
	quietRefOps    int
	quietRefWrite  time.Duration
	newHistoryRows int64
	newBytes       historySize
	// newPrune is the slowest of prunedHours.
	newPrune                        time.Duration
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

func (r metricsResult) newBytesPerSample() float64 {
	return float64(r.newBytes.total()) / float64(max(r.newBytes.rows, 1))
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
	g := newWatchGroup(ctx)
	defer g.close()
	w, err := d.watchNodeCapacities(ctx, g)
	if err != nil {
		return nil, err
	}
	platformPID, err := d.platformPID()
	if err != nil {
		return nil, err
	}
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
		cpuBefore := cpuClock(platformPID, kubePID)
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
		cpuAfter := cpuClock(platformPID, kubePID)
		s.platformCPU, s.kubeCPU = cpuAfter[0]-cpuBefore[0], cpuAfter[1]-cpuBefore[1]
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
func (d *discoveryEnv) awaitMetricsMarker(ctx context.Context, receipts <-chan ncReceipt, seq int, want map[string]string) (int, map[string]int, []string, error) {
	node := nodeName(metricsMarkerNode)
	if err := d.relabel(ctx, "nodes", node, metricsMarkerLabel, strconv.Itoa(seq)); err != nil {
		return 0, nil, nil, err
	}
	markerName := nodecapacity.Name(discoveryClusterID, node)
	events := 0
	byReason := map[string]int{}
	var unexpected []string
	seen := map[string]bool{}
	err := receive(ctx, receipts, metricsMarkerTimeout, func(r ncReceipt) (bool, error) {
		if r.err != nil || (r.name == markerName && r.marker == strconv.Itoa(seq)) {
			return true, r.err
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
		return false, nil
	}, func() error {
		return fmt.Errorf("no event of marker %d on %s within %s (%d other events)", seq, markerName, metricsMarkerTimeout, events)
	})
	return events, byReason, unexpected, err
}

// ncReceipt is one event (the object's name and marker label), or the error
// that ended the watch.
type ncReceipt struct {
	typ    watch.EventType
	name   string
	marker string
	err    error
}

// watchNodeCapacities watches NodeCapacities through the aggregator from
// now, in g on a connection of its own, and sends a receipt of each event.
func (d *discoveryEnv) watchNodeCapacities(ctx context.Context, g *watchGroup) (<-chan ncReceipt, error) {
	c, err := g.client(d.cp.AdminConfig(), nil)
	if err != nil {
		return nil, err
	}
	rv, _, err := latestRV(ctx, c)
	if err != nil {
		return nil, err
	}
	// Room for several scrapes' events: the reader never blocks.
	receipts := make(chan ncReceipt, 4*nodeCount)
	f := follower{open: c.PlatformV1alpha1().NodeCapacities().Watch, event: func(ev watch.Event, _ time.Time) bool {
		nc, ok := ev.Object.(*v1alpha1.NodeCapacity)
		switch {
		case !ok:
			deliver(g.ctx, receipts, ncReceipt{err: fmt.Errorf("%s event with a %T", ev.Type, ev.Object)})
			return false
		case ev.Type == watch.Bookmark:
			return true
		}
		return deliver(g.ctx, receipts, ncReceipt{typ: ev.Type, name: nc.Name, marker: nc.Labels[metricsMarkerLabel]})
	}, ended: func(err error) bool {
		deliver(g.ctx, receipts, ncReceipt{err: err})
		return false
	}}
	g.goWatch(func(ctx context.Context) { f.follow(ctx, rv) })
	return receipts, nil
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
// before the first scrape, into the registry's hourly partitions, vacuums
// and analyzes them (as autovacuum would have long since), and measures
// their size.
func (d *discoveryEnv) seedDayOfHistory(ctx context.Context, f *fleet, res *metricsResult) error {
	end := f.base
	if _, err := d.db.Exec(ctx, `SELECT cluster_node_metrics_ensure_partitions($1, $2)`,
		end.Add(-time.Duration(historySamples)*metricsInterval), end); err != nil {
		return fmt.Errorf("create the history's partitions: %w", err)
	}
	fmt.Fprintf(os.Stderr, "discovery: writing %d samples per node (%s of history)...\n", historySamples, metricsRetention)
	stop := heartbeat("writing the history")
	begin := time.Now()
	tag, err := d.db.Exec(ctx, seedHistorySQL, discoveryClusterID, end, metricsInterval.Seconds(), historySamples)
	if err == nil {
		_, err = d.db.Exec(ctx, `VACUUM (ANALYZE) cluster_node_metrics`)
	}
	stop()
	if err != nil {
		return fmt.Errorf("seed the history: %w", err)
	}
	if res.newHistoryRows = tag.RowsAffected(); res.newHistoryRows != int64(historySamples)*nodeCount {
		return fmt.Errorf("seeded %d samples, want %d", res.newHistoryRows, historySamples*nodeCount)
	}
	err = d.db.QueryRow(ctx, `
		SELECT coalesce(sum(pg_table_size(t.name::regclass)), 0)::int8, coalesce(sum(pg_indexes_size(t.name::regclass)), 0)::int8,
		       (SELECT count(*) FROM cluster_node_metrics)
		FROM (SELECT name FROM cluster_node_metrics_partitions()) AS t(name)`).Scan(&res.newBytes.table, &res.newBytes.indexes, &res.newBytes.rows)
	if err != nil {
		return fmt.Errorf("measure the metrics history: %w", err)
	}
	fmt.Fprintf(os.Stderr, "discovery: %d samples written, vacuumed and analyzed in %s: %s in partitions (%s table, %s indexes)\n",
		res.newHistoryRows, time.Since(begin).Round(time.Second), mibString(res.newBytes.total()), mibString(res.newBytes.table), mibString(res.newBytes.indexes))
	return nil
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

// pruneHistory is part 3: prunedHours times, the registry's oldest hourly
// partition is dropped by MaintainNodeMetrics (with RetainAfter its upper
// bound, as the maintenance does once the hour is older than the
// retention). The history's first hour is partial unless the first scrape
// was on the hour; it is pruned first, untimed.
func (d *discoveryEnv) pruneHistory(ctx context.Context, res *metricsResult) error {
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
		took := time.Since(t0)
		if err != nil {
			return err
		}
		if done.DroppedPartitions != 1 {
			return fmt.Errorf("prune before %s: dropped %d partitions, want 1 (%s with %d samples)", upper, done.DroppedPartitions, name, rows)
		}
		if rows != int64(samplesPerHour)*nodeCount {
			fmt.Fprintf(os.Stderr, "discovery: pruned the history's partial first hour (%d samples), untimed: %s\n", rows, took.Round(time.Microsecond))
			continue
		}
		fmt.Fprintf(os.Stderr, "discovery: pruned an hour (%d samples, before %s): %s (dropped %s)\n",
			rows, upper.UTC().Format(time.RFC3339), took.Round(time.Microsecond), name)
		res.prunedRows = rows
		res.newPrune = max(res.newPrune, took)
		res.prunedHoursMeasured++
	}
	return nil
}

// refreshCostPerNode is the write time per reported node: the timed loop's
// mean less the quiet reference's, over the loop's mean reported nodes (0
// when either is missing).
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

// summarize adds the quiet-fleet lines to the discovery summary.
func (r *metricsResult) summarize() {
	t := r.watchTotals()
	first := 0
	if len(r.scrapes) > 0 {
		first = r.scrapes[0].events
	}
	line := func(format string, args ...any) { summary.printf(discoverySection, format, args...) }
	line("metrics watch      %d scrapes after the first: %d nodes crossed the threshold, %d events of them; %d events beyond them and the period refresh; change-log rows and events = the policy's model, node for node: %s",
		t.scrapes, t.crossing, t.crossingEvents, t.otherEvents, matched(t.exact && t.otherEvents == 0 && t.crossing > 0 && t.crossingEvents == t.crossing))
	line("                   period refresh (each node at its own phase): %d–%d events a scrape, mean %.0f (nodes × interval / period = %.0f), so \"none beyond the crossers\" holds for the threshold part only",
		t.minRefreshEvents, t.maxRefreshEvents, t.meanRefreshEvents(), expectedRefresh())
	perEvent := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(t.events, 1)) }
	line("                   (first scrape %d events; server CPU %.0f µs platform, %.0f µs kube per event after it)", first, perEvent(t.platformCPU), perEvent(t.kubeCPU))
	line("metrics write      %s per scrape of %d samples (%.0f µs/sample; %d scrapes on %d samples of history)",
		r.newWrite.Round(100*time.Microsecond), nodeCount, float64(r.newWrite.Microseconds())/nodeCount, r.ops, r.newHistoryRows)
	ops := "no quiet scrape"
	if r.quietOps > 0 {
		ops = fmt.Sprintf("%d quiet scrapes %s each", r.quietOps, r.newQuietWrite.Round(100*time.Microsecond))
	}
	if n := len(r.reportingOps); n > 0 {
		var reported latencies
		var nodes int64
		lo, hi := r.reportingOps[0].reported, r.reportingOps[0].reported
		for _, op := range r.reportingOps {
			lo, hi, nodes = min(lo, op.reported), max(hi, op.reported), nodes+op.reported
			reported.add(op.took)
		}
		ops += fmt.Sprintf("; %d scrapes reporting %d–%d nodes (mean %d), slowest %s", n, lo, hi, nodes/int64(n), reported.max.Round(100*time.Microsecond))
	}
	line("                   (of which %s)", ops)
	if r.quietRefOps > 0 {
		line("                   (quiet reference, %d scrapes with no node due: %s each; the period refresh costs %s per reported node)",
			r.quietRefOps, r.quietRefWrite.Round(100*time.Microsecond), r.refreshCostPerNode().Round(time.Microsecond))
	}
	line("metrics history    %s for a day of %d nodes (%.0f bytes/sample); prune of an hour (%d samples) %s",
		mibString(r.newBytes.total()), nodeCount, r.newBytesPerSample(), r.prunedRows, r.newPrune.Round(100*time.Microsecond))
}

// matched says whether measured counts matched the model (no goal of the
// issue: the refresh's events are the model's too).
func matched(ok bool) string {
	if ok {
		return "matched"
	}
	return "MISMATCH"
}
