package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/test/framework"
)

const (
	// flipNodeIndex is the registry node whose label every watch op changes.
	flipNodeIndex = 4242
	// seqLabel numbers the changes, so a watcher can tell a missed, repeated
	// or reordered event from the next one.
	seqLabel = "bench.platform.example.io/seq"
	// watchersPerClient watches share one client-go transport. k8s.io/apiserver
	// lets a client open 100 HTTP/2 streams per connection unless
	// --http2-max-streams-per-connection says otherwise, and kube-apiserver
	// keeps that default.
	watchersPerClient = 100
	// openWorkers bounds how many watches are being opened at once.
	openWorkers = 50
	// watchRequestTimeout is the timeoutSeconds of every watch, far beyond
	// the benchmark, so the server never ends one mid-run.
	watchRequestTimeout = int64(30 * 60)
	// establishTimeout bounds opening the watches and delivering the first
	// change to all of them.
	establishTimeout = 2 * time.Minute
	// eventTimeout bounds one change reaching every watcher; far beyond the
	// goal, it only catches a lost event.
	eventTimeout = 30 * time.Second
	// idleWindow is how long the open watches sit idle while the
	// platform-apiserver's CPU time is measured.
	idleWindow = 10 * time.Second
)

// watcherCounts are the sub-benchmarks of BenchmarkWatchLatency.
var watcherCounts = []int{1, 100, 1000}

// Goal from the issue: p99 from commit to client receipt under a second with
// 1,000 watchers.
const (
	maxWatchP99       = time.Second
	watchGoalWatchers = 1000
)

var flipNodeCapacityName = nodecapacity.Name(clusterID, nodeName(flipNodeIndex))

// BenchmarkWatchLatency opens N watches of NodeCapacities through the
// aggregator, then per op commits one change of a node through the registry
// store and waits until every watcher has received its event. It reports the
// latency from Apply returning to each watcher's receipt (p50, p99, max over
// every watcher and op), then, with the watches idle, the platform-apiserver's
// CPU use and memory.
func BenchmarkWatchLatency(b *testing.B) {
	e := setup(b)
	cpu := map[int]watchLatency{}
	for _, n := range watcherCounts {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			cpu[n] = benchWatch(b, e, n)
		})
	}
	printWatchCPU(os.Stdout, cpu)
}

func benchWatch(b *testing.B, e *env, n int) watchLatency {
	ctx := b.Context()
	ws, err := e.establishWatches(ctx, n)
	if ws != nil {
		defer func() {
			if err := ws.close(context.WithoutCancel(ctx)); err != nil {
				b.Error(err)
			}
		}()
	}
	if err != nil {
		b.Fatal(err)
	}
	lat := runWatchOps(b, e, ws)
	if lat.idleCores, err = e.platformCPU(ctx, idleWindow); err != nil {
		b.Fatal(err)
	}
	if err := ws.expectQuiet(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(lat.idleCores, "idle-cores")
	e.reportPlatformMemory(b)
	if err := e.reportPlatformHeap(b); err != nil {
		b.Fatal(err)
	}
	if *profileDir != "" {
		name := fmt.Sprintf("platform-apiserver.watchers-%d.heap.pprof", n)
		if err := e.writeHeapProfile(ctx, filepath.Join(*profileDir, name)); err != nil {
			b.Fatal(err)
		}
	}
	e.results.record(b)
	e.results.recordWatch(b, lat)
	return lat
}

// establishWatches opens n watches and commits a first change, which every
// watcher receiving proves they are all established; the platform-apiserver
// must then count n watches. On error the returned set, when non-nil, holds
// what was opened, for close.
func (e *env) establishWatches(ctx context.Context, n int) (*watchSet, error) {
	begin := time.Now()
	ws, err := e.openWatches(ctx, n)
	if err != nil {
		return ws, err
	}
	if _, err := ws.commit(ctx, establishTimeout); err != nil {
		return ws, fmt.Errorf("first change: %w", err)
	}
	serving, err := e.platformWatches(ctx)
	if err != nil {
		return ws, err
	}
	if serving != n {
		return ws, fmt.Errorf("platform-apiserver serves %d NodeCapacity watches, want %d", serving, n)
	}
	fmt.Fprintf(os.Stderr, "%d watches established in %s; %s\n", n, time.Since(begin).Round(time.Millisecond), e.connectionCounts())
	return ws, nil
}

// runWatchOps is the timed loop: one change per op, awaited by every watcher.
// It reports the latency percentiles and the CPU time per op of each process
// on the event's path.
func runWatchOps(b *testing.B, e *env, ws *watchSet) watchLatency {
	cpuBefore, err := e.watchPathCPU()
	if err != nil {
		b.Fatal(err)
	}
	var latencies []time.Duration
	for b.Loop() {
		got, err := ws.commit(b.Context(), eventTimeout)
		if err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, got...)
	}
	cpuAfter, err := e.watchPathCPU()
	if err != nil {
		b.Fatal(err)
	}
	lat := summarizeLatencies(latencies)
	b.ReportMetric(ms(lat.p50), "p50-ms")
	b.ReportMetric(ms(lat.p99), "p99-ms")
	b.ReportMetric(ms(lat.max), "max-ms")
	perOp := func(before, after time.Duration) float64 { return ms(after-before) / float64(b.N) }
	b.ReportMetric(perOp(cpuBefore.platform, cpuAfter.platform), "platform-cpu-ms/op")
	b.ReportMetric(perOp(cpuBefore.kube, cpuAfter.kube), "kube-cpu-ms/op")
	b.ReportMetric(perOp(cpuBefore.client, cpuAfter.client), "client-cpu-ms/op")
	// Per delivered event: one op delivers one change to every watcher.
	lat.changes, lat.watchers = b.N, len(ws.watches)
	lat.platformCPU, lat.kubeCPU = cpuAfter.platform-cpuBefore.platform, cpuAfter.kube-cpuBefore.kube
	b.ReportMetric(lat.perEvent(lat.platformCPU), "platform-cpu-us/event")
	b.ReportMetric(lat.perEvent(lat.kubeCPU), "kube-cpu-us/event")
	return lat
}

// cpuUse is the CPU time used so far by each process an event passes
// through: the platform-apiserver, kube-apiserver (the aggregator) and this
// test binary (the registry write and the client-go watchers).
type cpuUse struct{ platform, kube, client time.Duration }

func (e *env) watchPathCPU() (cpuUse, error) {
	var u cpuUse
	platform := e.cp.PlatformAPIServerPID()
	if platform == 0 {
		return u, errors.New("platform-apiserver is not running")
	}
	kube, err := e.kubeAPIServerPID()
	if err != nil {
		return u, err
	}
	for _, p := range []struct {
		pid int
		dst *time.Duration
	}{{platform, &u.platform}, {kube, &u.kube}, {os.Getpid(), &u.client}} {
		if *p.dst, err = processCPUTime(p.pid); err != nil {
			return u, err
		}
	}
	return u, nil
}

// reportPlatformHeap reports the platform-apiserver's Go heap in use
// (heap-MiB), which tells its live memory from what the runtime keeps.
func (e *env) reportPlatformHeap(b *testing.B) error {
	body, err := e.cp.PlatformMetrics(b.Context())
	if err != nil {
		return err
	}
	heap, err := framework.MetricSum(body, "go_memstats_heap_inuse_bytes")
	if err != nil {
		return err
	}
	goroutines, err := framework.MetricSum(body, "go_goroutines")
	if err != nil {
		return err
	}
	b.ReportMetric(heap/mib, "heap-MiB")
	fmt.Fprintf(os.Stderr, "%s: platform-apiserver has %.0f goroutines\n", b.Name(), goroutines)
	return nil
}

// watchSet is N open watches and the goroutines that read them. Each watcher
// checks its own stream: only MODIFIED events of the flipped node, each change
// exactly once, in order, with rising resourceVersions.
type watchSet struct {
	e          *env
	watches    []watch.Interface
	transports []http.RoundTripper
	receipts   chan receipt
	done       chan struct{}
	wg         sync.WaitGroup
}

// receipt is one watcher's receipt of change seq, or the error that ended it.
type receipt struct {
	watcher int
	seq     int
	rv      string
	at      time.Time
	err     error
}

// openWatches lists NodeCapacities for a resourceVersion and opens n watches
// from it, watchersPerClient per client-go transport. On error the returned
// set, when non-nil, holds what was opened, for close.
func (e *env) openWatches(ctx context.Context, n int) (*watchSet, error) {
	list, err := e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("list NodeCapacities for a resourceVersion: %w", err)
	}
	ws := &watchSet{
		e:        e,
		watches:  make([]watch.Interface, n),
		receipts: make(chan receipt, n),
		done:     make(chan struct{}),
	}
	var clients []versioned.Interface
	for range (n + watchersPerClient - 1) / watchersPerClient {
		c, rt, err := e.watchClient()
		if err != nil {
			return ws, err
		}
		clients = append(clients, c)
		ws.transports = append(ws.transports, rt)
	}

	// The next change committed is the first every watcher expects.
	first := e.flips
	opts := metav1.ListOptions{
		ResourceVersion:     list.ResourceVersion,
		AllowWatchBookmarks: true, // as reflectors and informers ask
		TimeoutSeconds:      new(watchRequestTimeout),
	}
	var mu sync.Mutex
	var errs []error
	workqueue.ParallelizeUntil(ctx, openWorkers, n, func(i int) {
		w, err := clients[i/watchersPerClient].PlatformV1alpha1().NodeCapacities().Watch(ctx, opts)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("open watch %d: %w", i, err))
			return
		}
		ws.watches[i] = w
		ws.wg.Add(1)
		go ws.follow(i, w, first, list.ResourceVersion)
	})
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return ws, errors.Join(errs...)
}

// watchClient returns a JSON clientset with a transport, and so HTTP/2
// connections, of its own: a config with a Proxy func is one client-go's
// transport cache cannot share. The Proxy func also keeps the watches off any
// proxy the environment names.
func (e *env) watchClient() (versioned.Interface, http.RoundTripper, error) {
	cfg := jsonConfig(e.cp.AdminConfig())
	cfg.Timeout = 0 // an http.Client timeout would cut the watch
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("watch client transport: %w", err)
	}
	c, err := versioned.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, fmt.Errorf("watch client: %w", err)
	}
	return c, hc.Transport, nil
}

// follow reads watcher i's events and sends a receipt for each change, or
// the error that makes the stream wrong, until the set closes.
func (ws *watchSet) follow(i int, w watch.Interface, next int, fromRV string) {
	defer ws.wg.Done()
	lastRV, err := strconv.ParseInt(fromRV, 10, 64)
	if err != nil {
		ws.send(receipt{watcher: i, err: fmt.Errorf("list resourceVersion %q: %w", fromRV, err)})
		return
	}
	for ev := range w.ResultChan() {
		at := time.Now()
		rv, err := checkEvent(ev, next, lastRV)
		if err != nil {
			ws.send(receipt{watcher: i, err: err})
			return
		}
		lastRV = rv
		if ev.Type == watch.Bookmark {
			continue
		}
		if !ws.send(receipt{watcher: i, seq: next, rv: strconv.FormatInt(rv, 10), at: at}) {
			return
		}
		next++
	}
	ws.send(receipt{watcher: i, err: errors.New("watch ended")})
}

// checkEvent checks that ev is change seq of the flipped node (or a bookmark)
// and that its resourceVersion follows lastRV; it returns that version.
func checkEvent(ev watch.Event, seq int, lastRV int64) (int64, error) {
	if ev.Type == watch.Error {
		return 0, fmt.Errorf("watch error: %w", apierrors.FromObject(ev.Object))
	}
	nc, ok := ev.Object.(*v1alpha1.NodeCapacity)
	if !ok {
		return 0, fmt.Errorf("%s event with a %T", ev.Type, ev.Object)
	}
	rv, err := strconv.ParseInt(nc.ResourceVersion, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s event with resourceVersion %q: %w", ev.Type, nc.ResourceVersion, err)
	}
	if ev.Type == watch.Bookmark {
		if rv < lastRV {
			return 0, fmt.Errorf("bookmark at resourceVersion %d after %d", rv, lastRV)
		}
		return rv, nil
	}
	if ev.Type != watch.Modified || nc.Name != flipNodeCapacityName {
		return 0, fmt.Errorf("unexpected %s event of %s at resourceVersion %d", ev.Type, nc.Name, rv)
	}
	if got := nc.Labels[seqLabel]; got != strconv.Itoa(seq) {
		return 0, fmt.Errorf("got change %q at resourceVersion %d, want change %d next", got, rv, seq)
	}
	if rv <= lastRV {
		return 0, fmt.Errorf("change %d at resourceVersion %d, not after %d", seq, rv, lastRV)
	}
	return rv, nil
}

// send delivers r unless the set is closing; it reports whether it did.
func (ws *watchSet) send(r receipt) bool {
	select {
	case ws.receipts <- r:
		return true
	case <-ws.done:
		return false
	}
}

// commit applies the next change through the registry store and waits until
// every watcher has received it. It returns, per watcher, the time from Apply
// returning to receipt.
func (ws *watchSet) commit(ctx context.Context, timeout time.Duration) ([]time.Duration, error) {
	seq := ws.e.flips
	ws.e.flips++
	node := storeNode(flipNodeIndex, ws.e.seededAt)
	node.Labels[seqLabel] = strconv.Itoa(seq)
	if err := ws.e.registry.Apply(ctx, store.Batch{ClusterID: clusterID, Nodes: []store.Node{node}}); err != nil {
		return nil, fmt.Errorf("apply change %d: %w", seq, err)
	}
	committed := time.Now()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	n := len(ws.watches)
	latencies := make([]time.Duration, 0, n)
	var rv string
	for len(latencies) < n {
		select {
		case r := <-ws.receipts:
			if r.err != nil {
				return nil, fmt.Errorf("watcher %d, waiting for change %d: %w", r.watcher, seq, r.err)
			}
			if r.seq != seq {
				return nil, fmt.Errorf("watcher %d received change %d while change %d was awaited", r.watcher, r.seq, seq)
			}
			if rv == "" {
				rv = r.rv
			} else if r.rv != rv {
				return nil, fmt.Errorf("watcher %d received change %d at resourceVersion %s, another at %s", r.watcher, seq, r.rv, rv)
			}
			// The event cannot leave the server before the commit, but
			// the clock is read only after Apply returns.
			latencies = append(latencies, max(0, r.at.Sub(committed)))
		case <-timer.C:
			return nil, fmt.Errorf("%d of %d watchers received change %d within %s", len(latencies), n, seq, timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return latencies, nil
}

// expectQuiet fails if any watcher received anything since the last change
// it was waited for (a repeated event, say) or its watch ended.
func (ws *watchSet) expectQuiet() error {
	select {
	case r := <-ws.receipts:
		if r.err != nil {
			return fmt.Errorf("watcher %d: %w", r.watcher, r.err)
		}
		return fmt.Errorf("watcher %d received change %d, which was never committed", r.watcher, r.seq)
	default:
		return nil
	}
}

// close stops every watch, waits for their readers, closes the transports'
// connections and waits until the platform-apiserver serves none of them.
func (ws *watchSet) close(ctx context.Context) error {
	close(ws.done)
	for _, w := range ws.watches {
		if w != nil {
			w.Stop()
		}
	}
	ws.wg.Wait()
	for _, rt := range ws.transports {
		utilnet.CloseIdleConnectionsFor(rt)
	}
	var last int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := ws.e.platformWatches(ctx)
		last = n
		return err == nil && n == 0, nil
	})
	if err != nil {
		return fmt.Errorf("platform-apiserver still serves %d NodeCapacity watches after they were stopped: %w", last, err)
	}
	return nil
}

// watchLatency summarizes one sub-benchmark of BenchmarkWatchLatency.
type watchLatency struct {
	p50, p99, max time.Duration
	samples       int
	idleCores     float64

	// changes were each delivered to watchers watchers while the
	// platform-apiserver and kube-apiserver used platformCPU and kubeCPU.
	changes, watchers    int
	platformCPU, kubeCPU time.Duration
}

// perEvent is cpu per delivered event (a change reaching one watcher), in µs.
func (l watchLatency) perEvent(cpu time.Duration) float64 {
	if l.changes*l.watchers == 0 {
		return 0
	}
	return float64(cpu) / float64(time.Microsecond) / float64(l.changes*l.watchers)
}

// perChange is cpu per change, in ms.
func (l watchLatency) perChange(cpu time.Duration) float64 {
	if l.changes == 0 {
		return 0
	}
	return ms(cpu) / float64(l.changes)
}

// maxEventCPURatio is the goal for the platform-apiserver's CPU per
// delivered event: flat within 2× from 1 to 1,000 watchers.
const maxEventCPURatio = 2

// printWatchCPU prints the platform-apiserver's CPU per change and per
// delivered event for each watcher count, the ratio of the largest count's
// per-event figure to one watcher's, and what each watcher beyond the first
// adds. /proc counts CPU in 10 ms ticks, so a figure over few changes is
// coarse: ±10 ms over the loop. Its lines do not start with "Benchmark", so
// benchstat ignores them.
func printWatchCPU(w io.Writer, byWatchers map[int]watchLatency) {
	one, ok := byWatchers[1]
	if !ok || one.changes == 0 {
		return
	}
	var firstAdded float64
	var firstN int
	fmt.Fprintf(w, "watch CPU (platform-apiserver; kube-apiserver in parentheses; ±10 ms over each loop; goal: per delivered event at %d watchers ≤ %d× one watcher's):\n", watchGoalWatchers, maxEventCPURatio)
	for _, n := range watcherCounts {
		l, ok := byWatchers[n]
		if !ok || l.changes == 0 {
			continue
		}
		line := fmt.Sprintf("  %4d watchers  %7.2f ms/change (%7.2f)  %7.1f µs/event (%7.1f)  over %d changes",
			n, l.perChange(l.platformCPU), l.perChange(l.kubeCPU), l.perEvent(l.platformCPU), l.perEvent(l.kubeCPU), l.changes)
		if n > 1 {
			// What each watcher beyond the first adds to a change: the
			// part that grows with watchers, without the change's fixed
			// cost (the write's notification, the follower's read, one
			// conversion and encoding).
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
		fmt.Fprintln(w, line)
	}
}

// summarizeLatencies takes nearest-rank percentiles of every sample.
func summarizeLatencies(samples []time.Duration) watchLatency {
	if len(samples) == 0 {
		return watchLatency{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return watchLatency{p50: rank(0.50), p99: rank(0.99), max: s[len(s)-1], samples: len(s)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
