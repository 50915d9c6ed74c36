package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

const (
	// flipNodeIndex is the node every op changes; seqLabel numbers the
	// changes, so a watcher tells a missed, repeated or reordered one.
	flipNodeIndex    = 4242
	seqLabel         = "bench.platform.example.io/seq"
	establishTimeout = 2 * time.Minute  // opening the watches and the first change
	eventTimeout     = 30 * time.Second // one change to every watcher: catches a lost event
	idleWindow       = 10 * time.Second // the idle watches' CPU window
	// Goals from the issue: p99 under a second with 1,000 watchers, and CPU
	// per delivered event flat within 2× from 1 to 1,000 watchers.
	maxWatchP99       = time.Second
	watchGoalWatchers = 1000
	maxEventCPURatio  = 2
)

var watcherCounts = []int{1, 100, 1000}

var flipNodeCapacityName = nodecapacity.Name(clusterID, nodeName(flipNodeIndex))

// BenchmarkWatchLatency opens N watches through the aggregator; per op it
// commits one change through the registry store and waits until every
// watcher has it: latency from Apply returning to each receipt, then with
// the watches idle the platform-apiserver's CPU and memory.
func BenchmarkWatchLatency(b *testing.B) {
	e := setup(b)
	cpu := map[int]watchLatency{}
	for _, n := range watcherCounts {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			cpu[n] = benchWatch(b, e, n)
		})
	}
	summarizeWatchCPU(cpu)
}

func benchWatch(b *testing.B, e *env, n int) watchLatency {
	ctx := b.Context()
	ws, err := e.openWatches(ctx, n)
	if ws != nil {
		defer func() {
			if err := e.closeWatches(context.WithoutCancel(ctx), ws.g); err != nil {
				b.Error(err)
			}
		}()
	}
	must(b, err)
	// A first change proves the watches established; then the server must
	// count n.
	if _, err := ws.commit(ctx, establishTimeout); err != nil {
		b.Fatalf("first change: %v", err)
	}
	must(b, e.expectWatches(ctx, n))
	lat := runWatchOps(b, e, ws)
	idleCores, err := e.platformCPU(ctx, idleWindow)
	must(b, err)
	must(b, ws.expectQuiet())
	b.ReportMetric(idleCores, "idle-cores")
	rss, hwm := e.reportPlatformMemory(b)
	must(b, e.reportPlatformHeap(b))
	must(b, e.heapProfile(ctx, fmt.Sprintf("platform-apiserver.watchers-%d.heap.pprof", n), false))
	line := fmt.Sprintf("%4d watchers  %s samples  idle: %.3f cores, VmRSS %.1f MiB, VmHWM %.1f MiB", n, lat.percentiles, idleCores, rss, hwm)
	if n == watchGoalWatchers {
		line += "  " + verdict(lat.p99 < maxWatchP99)
	}
	summary.printf(fmt.Sprintf("watch, commit to client receipt through the aggregator (goal: p99 < %s with %d watchers)", maxWatchP99, watchGoalWatchers), "%s", line)
	return lat
}

// runWatchOps is the timed loop; it reports the latencies and the CPU per op
// of each process on the event's path.
func runWatchOps(b *testing.B, e *env, ws *watchSet) watchLatency {
	platform, err := e.platformPID()
	must(b, err)
	kube, err := e.kubeAPIServerPID()
	must(b, err)
	// The platform-apiserver, the aggregator and this binary (the write, the watchers).
	pids := []int{platform, kube, os.Getpid()}
	before := cpuClock(pids...)
	hist := loopLatencies(b, func() ([]time.Duration, error) { return ws.commit(b.Context(), eventTimeout) })
	after := cpuClock(pids...)
	lat := watchLatency{percentiles: hist.summary(), changes: b.N, watchers: ws.n,
		platformCPU: after[0] - before[0], kubeCPU: after[1] - before[1]}
	lat.report(b, "", true)
	b.ReportMetric(ms(lat.platformCPU)/float64(b.N), "platform-cpu-ms/op")
	b.ReportMetric(ms(lat.kubeCPU)/float64(b.N), "kube-cpu-ms/op")
	b.ReportMetric(ms(after[2]-before[2])/float64(b.N), "client-cpu-ms/op")
	// Per delivered event: one op delivers one change to every watcher.
	b.ReportMetric(lat.perEvent(lat.platformCPU), "platform-cpu-us/event")
	b.ReportMetric(lat.perEvent(lat.kubeCPU), "kube-cpu-us/event")
	return lat
}

// reportPlatformHeap reports the platform-apiserver's Go heap in use (heap-MiB).
func (e *env) reportPlatformHeap(b *testing.B) error {
	var heap float64
	err := readCounters(b.Context(), e.cp.PlatformMetrics, counter{&heap, "go_memstats_heap_inuse_bytes", nil})
	if err == nil {
		b.ReportMetric(heap/mib, "heap-MiB")
	}
	return err
}

// watchSet is n open watches and their readers.
type watchSet struct {
	e        *env
	g        *watchGroup
	n        int
	receipts chan receipt
}

// receipt is one watcher's receipt of change seq, or the error that ended it.
type receipt struct {
	watcher int
	seq     int
	rv      int64
	at      time.Time
	err     error
}

// openWatches opens n watches from a listed resourceVersion,
// watchersPerClient per transport.
func (e *env) openWatches(ctx context.Context, n int) (*watchSet, error) {
	rv, from, err := latestRV(ctx, e.platform)
	if err != nil {
		return nil, err
	}
	ws := &watchSet{e: e, g: newWatchGroup(ctx), n: n, receipts: make(chan receipt, n)}
	clients, err := ws.g.clients(e.cp.AdminConfig, n, nil)
	if err != nil {
		return ws, err
	}
	// The next change committed is the first every watcher expects.
	first := e.flips
	opts := metav1.ListOptions{
		ResourceVersion:     rv,
		AllowWatchBookmarks: true, // as reflectors and informers ask
		TimeoutSeconds:      new(watchRequestTimeout),
	}
	return ws, parallel(ctx, openWorkers, n, func(_ context.Context, i int) error {
		w, err := clients[i/watchersPerClient].PlatformV1alpha1().NodeCapacities().Watch(ws.g.ctx, opts)
		if err != nil {
			return fmt.Errorf("open watch %d: %w", i, err)
		}
		ws.g.goWatch(func(ctx context.Context) { ws.follow(ctx, i, w, first, from) })
		return nil
	})
}

// follow sends a receipt for each of watcher i's changes, or the error that
// makes its stream wrong.
func (ws *watchSet) follow(ctx context.Context, i int, w watch.Interface, next int, lastRV int64) {
	defer w.Stop()
	f := follower{event: func(ev watch.Event, at time.Time) bool {
		rv, err := checkEvent(ev, next, lastRV)
		if err != nil {
			deliver(ctx, ws.receipts, receipt{watcher: i, err: err})
			return false
		}
		lastRV = rv
		if ev.Type == watch.Bookmark {
			return true
		}
		next++
		return deliver(ctx, ws.receipts, receipt{watcher: i, seq: next - 1, rv: rv, at: at})
	}}
	if _, stopped, err := f.read(w, ""); !stopped {
		deliver(ctx, ws.receipts, receipt{watcher: i, err: err})
	}
}

// checkEvent checks that ev is change seq of the flipped node (or a
// bookmark) after lastRV, and returns its resourceVersion.
func checkEvent(ev watch.Event, seq int, lastRV int64) (int64, error) {
	nc, ok := ev.Object.(*v1alpha1.NodeCapacity)
	if !ok {
		return 0, fmt.Errorf("%s event with a %T", ev.Type, ev.Object)
	}
	rv, err := strconv.ParseInt(nc.ResourceVersion, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s event with resourceVersion %q: %w", ev.Type, nc.ResourceVersion, err)
	}
	switch {
	case ev.Type == watch.Bookmark && rv < lastRV:
		return 0, fmt.Errorf("bookmark at resourceVersion %d after %d", rv, lastRV)
	case ev.Type == watch.Bookmark:
		return rv, nil
	case ev.Type != watch.Modified || nc.Name != flipNodeCapacityName:
		return 0, fmt.Errorf("unexpected %s event of %s at resourceVersion %d", ev.Type, nc.Name, rv)
	case nc.Labels[seqLabel] != strconv.Itoa(seq):
		return 0, fmt.Errorf("got change %q at resourceVersion %d, want change %d next", nc.Labels[seqLabel], rv, seq)
	case rv <= lastRV:
		return 0, fmt.Errorf("change %d at resourceVersion %d, not after %d", seq, rv, lastRV)
	}
	return rv, nil
}

// commit applies the next change and returns, per watcher, the time from
// Apply returning to its receipt.
func (ws *watchSet) commit(ctx context.Context, timeout time.Duration) ([]time.Duration, error) {
	seq := ws.e.flips
	ws.e.flips++
	node := storeNode(flipNodeIndex, ws.e.seededAt)
	node.Labels[seqLabel] = strconv.Itoa(seq)
	if err := ws.e.registry.Apply(ctx, store.Batch{ClusterID: clusterID, Nodes: []store.Node{node}}); err != nil {
		return nil, fmt.Errorf("apply change %d: %w", seq, err)
	}
	committed := time.Now()

	got := make([]time.Duration, 0, ws.n)
	var rv int64
	err := receive(ctx, ws.receipts, timeout, func(r receipt) (bool, error) {
		switch {
		case r.err != nil:
			return false, fmt.Errorf("watcher %d, waiting for change %d: %w", r.watcher, seq, r.err)
		case r.seq != seq:
			return false, fmt.Errorf("watcher %d received change %d while change %d was awaited", r.watcher, r.seq, seq)
		case rv != 0 && r.rv != rv:
			return false, fmt.Errorf("watcher %d received change %d at resourceVersion %d, another at %d", r.watcher, seq, r.rv, rv)
		}
		rv = r.rv
		got = append(got, max(0, r.at.Sub(committed)))
		return len(got) == ws.n, nil
	}, func() error {
		return fmt.Errorf("%d of %d watchers received change %d within %s", len(got), ws.n, seq, timeout)
	})
	return got, err
}

// expectQuiet fails if a watcher received anything since the last change.
func (ws *watchSet) expectQuiet() error {
	return expectNothing(ws.receipts, func(r receipt) error {
		if r.err != nil {
			return fmt.Errorf("watcher %d: %w", r.watcher, r.err)
		}
		return fmt.Errorf("watcher %d received change %d, which was never committed", r.watcher, r.seq)
	})
}

// watchLatency summarizes one sub-benchmark: changes each delivered to
// watchers watchers, with the servers' CPU.
type watchLatency struct {
	percentiles
	changes, watchers    int // both at least 1
	platformCPU, kubeCPU time.Duration
}

// perEvent is cpu per delivered event, in µs; perChange per change, in ms.
func (l watchLatency) perEvent(cpu time.Duration) float64 {
	return float64(cpu) / float64(time.Microsecond) / float64(l.changes*l.watchers)
}

func (l watchLatency) perChange(cpu time.Duration) float64 { return ms(cpu) / float64(l.changes) }

// summarizeWatchCPU adds the CPU per change and per event for each watcher
// count, what each watcher beyond the first adds, and the per-event ratio to
// one watcher's.
func summarizeWatchCPU(byWatchers map[int]watchLatency) {
	one, ok := byWatchers[1]
	if !ok || one.changes == 0 {
		return
	}
	section := fmt.Sprintf("watch CPU (platform-apiserver; kube-apiserver in parentheses; ±10 ms over each loop; goal: per delivered event at %d watchers ≤ %d× one watcher's)", watchGoalWatchers, maxEventCPURatio)
	var firstAdded float64
	var firstN int
	for _, n := range watcherCounts {
		l, ok := byWatchers[n]
		if !ok || l.changes == 0 {
			continue
		}
		line := fmt.Sprintf("%4d watchers  %7.2f ms/change (%7.2f)  %7.1f µs/event (%7.1f)  over %d changes",
			n, l.perChange(l.platformCPU), l.perChange(l.kubeCPU), l.perEvent(l.platformCPU), l.perEvent(l.kubeCPU), l.changes)
		if n > 1 {
			added := (l.perChange(l.platformCPU) - one.perChange(one.platformCPU)) * 1000 / float64(n-1)
			line += fmt.Sprintf("  +%.1f µs per added watcher", added)
			if firstAdded == 0 {
				firstAdded, firstN = added, n
			} else if firstAdded > 0 {
				line += fmt.Sprintf(" (%.2f× that at %d)", added/firstAdded, firstN)
			}
			if one.platformCPU == 0 {
				line += "  per event: one watcher's CPU is below the resolution"
			} else {
				ratio := l.perEvent(l.platformCPU) / one.perEvent(one.platformCPU)
				line += fmt.Sprintf("  per event %.3f× one watcher's", ratio)
				if n == watchGoalWatchers {
					line += "  " + verdict(ratio <= maxEventCPURatio)
				}
			}
		}
		summary.printf(section, "%s", line)
	}
}
