package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

const (
	resumeInformers = 1000
	// The informers select cluster resumeCluster's resumeNodes nodes.
	resumeCluster = "storm"
	resumeNodes   = 10
	// resumeLabel numbers the change each op makes after the restart.
	resumeLabel = "bench.platform.example.io/resume"
	// resumeChurn changes the informers do not select precede each restart,
	// so they resume from behind the feed's head.
	resumeChurn       = 1000
	resumeTimeout     = 3 * time.Minute       // restart until every informer has the change
	resumePoll        = 10 * time.Millisecond // resolution of "every informer has it"
	resumeSyncTimeout = 3 * time.Minute
)

var resumeTarget = nodecapacity.Name(resumeCluster, nodeName(0))

// BenchmarkWatchResume: resumeInformers informers of resumeCluster on the
// platform-apiserver's own port (through the aggregator a restart is a 503,
// which makes reflectors relist); per op, with fresh informers, resumeChurn
// changes they do not select, a graceful restart (429 while it stops) and the
// wait until every informer has a change made after it. See
// docs/benchmarks.md, "BenchmarkWatchResume".
func BenchmarkWatchResume(b *testing.B) {
	e := benchEnv(b, envOptions{
		name:         "resume",
		platformArgs: []string{"--shutdown-delay-duration=1s", "--shutdown-send-retry-after"},
		prepare: func(ctx context.Context, e *env) error {
			// The registry only: the seeded nodes (so the restarted server's
			// window fills from real history) and the storm cluster.
			e.seededAt = time.Now().UTC().Truncate(time.Second)
			if err := seedRegistry(ctx, e.registry, e.seededAt); err != nil {
				return err
			}
			storm := store.Batch{ClusterID: resumeCluster}
			for i := range resumeNodes {
				storm.Nodes = append(storm.Nodes, storeNode(i, e.seededAt))
			}
			if err := e.registry.Apply(ctx, storm); err != nil {
				return fmt.Errorf("seed cluster %s: %w", resumeCluster, err)
			}
			return nil
		},
	})
	b.Run(fmt.Sprintf("informers=%d", resumeInformers), func(b *testing.B) { benchResume(b, e, resumeInformers) })
}

// resumeInformer is one informer of the storm cluster, counting its relists
// in its set and noting when it first holds the awaited change.
type resumeInformer struct {
	informer cache.SharedIndexInformer
	set      *resumeSet
	seen     atomic.Int64 // when first held, since set.base; 0: not yet
}

func newResumeInformer(client versioned.Interface, rs *resumeSet) (*resumeInformer, error) {
	ri := &resumeInformer{set: rs}
	selector := platform.ClusterLabel + "=" + resumeCluster
	ncs := client.PlatformV1alpha1().NodeCapacities()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			rs.relists.Add(1)
			opts.LabelSelector = selector
			return ncs.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				rs.relists.Add(1)
			}
			opts.LabelSelector = selector
			return ncs.Watch(ctx, opts)
		},
	}
	ri.informer = cache.NewSharedIndexInformer(lw, &v1alpha1.NodeCapacity{}, 0, cache.Indexers{})
	_, err := ri.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    ri.saw,
		UpdateFunc: func(_, obj any) { ri.saw(obj) },
	})
	return ri, err
}

func (ri *resumeInformer) saw(obj any) {
	nc, ok := obj.(*v1alpha1.NodeCapacity)
	if !ok || nc.Name != resumeTarget || nc.Labels[resumeLabel] != strconv.FormatInt(ri.set.want.Load(), 10) {
		return
	}
	if ri.seen.CompareAndSwap(0, int64(max(time.Since(ri.set.base), 1))) {
		ri.set.current.Add(1)
	}
}

// resumeSet is the storm's informers.
type resumeSet struct {
	e             *env
	g             *watchGroup
	informers     []*resumeInformer
	base          time.Time
	want, current atomic.Int64 // the op whose change is awaited, the informers that hold it
	// The reflectors' LISTs and watches with initial events (a relist with
	// WatchListClient, client-go's default).
	relists   atomic.Int64
	responses responseCounts
}

// responseCounts counts the informers' HTTP attempts by outcome, as their
// transports see them (client-go's own retries of a 429 count too).
type responseCounts map[string]*atomic.Int64

var responseOutcomes = []string{"connections refused", "other errors", "429", "401", "403", "503", "other ≥400"}

// responseTotals are counts of responseCounts, over every op.
type responseTotals map[string]int64

func (s responseTotals) String() string {
	parts := make([]string, len(responseOutcomes))
	for i, o := range responseOutcomes {
		parts[i] = fmt.Sprintf("%d %s", s[o], o)
	}
	return strings.Join(parts, ", ")
}

// countingTransport counts each request's outcome in c.
type countingTransport struct {
	rt http.RoundTripper
	c  responseCounts
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	switch {
	case err != nil && utilnet.IsConnectionRefused(err):
		t.c["connections refused"].Add(1)
	case err != nil:
		t.c["other errors"].Add(1)
	case t.c[strconv.Itoa(resp.StatusCode)] != nil:
		t.c[strconv.Itoa(resp.StatusCode)].Add(1)
	case resp.StatusCode >= 400:
		t.c["other ≥400"].Add(1)
	}
	return resp, err
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the transport.
func (t *countingTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }

// startInformers starts n informers on the server's own port,
// watchersPerClient per transport, and waits until all have synced.
func (e *env) startInformers(ctx context.Context, n int) (*resumeSet, error) {
	rs := &resumeSet{e: e, g: newWatchGroup(ctx), base: time.Now(), responses: responseCounts{}}
	for _, o := range responseOutcomes {
		rs.responses[o] = new(atomic.Int64)
	}
	rs.want.Store(-1)
	count := func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{rt: rt, c: rs.responses} }
	clients, err := rs.g.clients(e.cp.PlatformDirectConfig, n, count)
	if err != nil {
		return rs, err
	}
	for i := range n {
		ri, err := newResumeInformer(clients[i/watchersPerClient], rs)
		if err != nil {
			return rs, err
		}
		rs.informers = append(rs.informers, ri)
		rs.g.goWatch(func(ctx context.Context) { ri.informer.Run(ctx.Done()) })
	}
	ctx, cancel := context.WithTimeout(ctx, resumeSyncTimeout)
	defer cancel()
	for i, ri := range rs.informers {
		if !cache.WaitForCacheSync(ctx.Done(), ri.informer.HasSynced) {
			return rs, fmt.Errorf("informer %d did not sync within %s", i, resumeSyncTimeout)
		}
	}
	return rs, nil
}

// watchCounters are the platform-apiserver's counters of lists and watches.
type watchCounters struct {
	lists, initial, resumes                    float64
	databaseReads, memoryReads, sharedReads    float64
	closedBehind, notReady503, tooManyRequests float64
}

func (e *env) watchCounters(ctx context.Context) (watchCounters, error) {
	var c watchCounters
	nc := `resource="nodecapacities"`
	err := readCounters(ctx, e.cp.PlatformMetrics,
		counter{&c.lists, "apiserver_request_total", []string{`verb="LIST"`, nc}},
		counter{&c.initial, "platform_watch_requests_total", []string{`kind="NodeCapacity"`, `start="initial"`}},
		counter{&c.resumes, "platform_watch_requests_total", []string{`kind="NodeCapacity"`, `start="resume"`}},
		counter{&c.databaseReads, "platform_watch_history_reads_total", []string{`source="database"`}},
		counter{&c.memoryReads, "platform_watch_history_reads_total", []string{`source="memory"`}},
		counter{&c.sharedReads, "platform_watch_history_reads_total", []string{`source="shared"`}},
		counter{&c.closedBehind, "platform_watch_watchers_closed_behind_total", nil},
		counter{&c.notReady503, "apiserver_request_total", []string{nc, `code="503"`}},
		counter{&c.tooManyRequests, "apiserver_request_total", []string{nc, `code="429"`}})
	return c, err
}

// resumeOp is what one restart measured.
type resumeOp struct {
	restart, allCurrent time.Duration   // from the restart's start
	afterCommit         []time.Duration // per informer, from the change's commit
	counters            watchCounters
	clientRelists       int64
}

// benchResume: per op, untimed, fresh informers (a reflector's backoff after
// refused connections resets only after two quiet minutes) and resumeChurn
// changes; timed, the restart until every informer holds the change made
// after it; then the counters and a check of the informers' contents.
func benchResume(b *testing.B, e *env, n int) {
	ctx := b.Context()
	var ops []resumeOp
	responses := responseTotals{} // during the timed restarts
	for b.Loop() {
		b.StopTimer()
		rs, err := e.startInformers(ctx, n)
		if err != nil {
			rs.g.close()
			b.Fatal(err)
		}
		i := len(ops)
		err = e.churnSeededNodes(ctx, i)
		var op resumeOp
		if err == nil {
			relistsBefore := rs.relists.Load()
			for _, n := range rs.responses {
				n.Store(0)
			}
			b.StartTimer()
			op, err = rs.storm(ctx, i)
			b.StopTimer()
			if err == nil {
				op.counters, err = e.watchCounters(ctx)
			}
			op.clientRelists = rs.relists.Load() - relistsBefore
			for o, n := range rs.responses {
				responses[o] += n.Load()
			}
		}
		if err == nil {
			err = rs.checkExact(ctx, e)
		}
		rs.g.close()
		must(b, err)
		ops = append(ops, op)
		b.StartTimer()
	}
	reportResume(b, ops, n, responses)
}

// churnSeededNodes changes resumeChurn seeded nodes in Applies of burstBatch.
func (e *env) churnSeededNodes(ctx context.Context, round int) error {
	for first := 0; first < resumeChurn; first += burstBatch {
		batch := store.Batch{ClusterID: clusterID}
		for i := first; i < min(first+burstBatch, resumeChurn); i++ {
			node := storeNode((round*resumeChurn+i)%nodeCount, e.seededAt)
			node.Labels[resumeLabel] = strconv.Itoa(round)
			batch.Nodes = append(batch.Nodes, node)
		}
		if err := e.registry.Apply(ctx, batch); err != nil {
			return fmt.Errorf("churn: %w", err)
		}
	}
	return nil
}

// storm restarts the platform-apiserver, commits change op of the target
// once it is ready, and waits until every informer holds it.
func (rs *resumeSet) storm(ctx context.Context, op int) (resumeOp, error) {
	var res resumeOp
	e := rs.e
	rs.current.Store(0)
	for _, ri := range rs.informers {
		ri.seen.Store(0)
	}
	rs.want.Store(int64(op))
	begin := time.Since(rs.base)
	if err := e.cp.RestartPlatformAPIServer(ctx); err != nil {
		return res, err
	}
	res.restart = time.Since(rs.base) - begin
	node := storeNode(0, e.seededAt)
	node.Labels[resumeLabel] = strconv.Itoa(op)
	if err := e.registry.Apply(ctx, store.Batch{ClusterID: resumeCluster, Nodes: []store.Node{node}}); err != nil {
		return res, fmt.Errorf("change after the restart: %w", err)
	}
	committed := time.Since(rs.base)
	n := int64(len(rs.informers))
	err := wait.PollUntilContextTimeout(ctx, resumePoll, resumeTimeout, true, func(context.Context) (bool, error) {
		return rs.current.Load() == n, nil
	})
	if err != nil {
		return res, fmt.Errorf("%d of %d informers hold the change made after restart %d within %s: %w", rs.current.Load(), n, op, resumeTimeout, err)
	}
	var last time.Duration
	for _, ri := range rs.informers {
		seen := time.Duration(ri.seen.Load())
		last = max(last, seen)
		res.afterCommit = append(res.afterCommit, max(0, seen-committed))
	}
	res.allCurrent = last - begin
	return res, nil
}

// checkExact checks that every informer holds exactly the storm cluster's
// NodeCapacities as the server lists them.
func (rs *resumeSet) checkExact(ctx context.Context, e *env) error {
	want, err := e.direct.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{LabelSelector: platform.ClusterLabel + "=" + resumeCluster})
	if err != nil {
		return err
	}
	if len(want.Items) != resumeNodes {
		return fmt.Errorf("the server lists %d NodeCapacities of cluster %s, want %d", len(want.Items), resumeCluster, resumeNodes)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, ri := range rs.informers {
			s := ri.informer.GetStore()
			if len(s.ListKeys()) != len(want.Items) {
				return false, nil
			}
			for _, nc := range want.Items {
				obj, ok, _ := s.GetByKey(nc.Name)
				if !ok || obj.(*v1alpha1.NodeCapacity).ResourceVersion != nc.ResourceVersion {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// reportResume reports the ops: means, maxima, and the worst op's counts
// (each the most of any op; resumes the fewest).
func reportResume(b *testing.B, ops []resumeOp, informers int, responses responseTotals) {
	var restartMean, restartMax, allCurrentMean, allCurrentMax time.Duration
	var hist latencies // from the commit, every informer of every op
	var clientRelists int64
	w := watchCounters{resumes: -1}
	for _, op := range ops {
		restartMean += op.restart / time.Duration(len(ops))
		restartMax = max(restartMax, op.restart)
		allCurrentMean += op.allCurrent / time.Duration(len(ops))
		allCurrentMax = max(allCurrentMax, op.allCurrent)
		hist.add(op.afterCommit...)
		c := op.counters
		w.lists, w.initial, w.memoryReads = max(w.lists, c.lists), max(w.initial, c.initial), max(w.memoryReads, c.memoryReads)
		w.databaseReads, w.sharedReads = max(w.databaseReads, c.databaseReads), max(w.sharedReads, c.sharedReads)
		w.tooManyRequests, w.notReady503 = max(w.tooManyRequests, c.tooManyRequests), max(w.notReady503, c.notReady503)
		if w.resumes < 0 || c.resumes < w.resumes {
			w.resumes = c.resumes
		}
		clientRelists = max(clientRelists, op.clientRelists)
	}
	lat := hist.summary()
	b.ReportMetric(ms(restartMean), "restart-ms")
	b.ReportMetric(ms(allCurrentMean), "all-current-ms")
	b.ReportMetric(ms(allCurrentMax), "all-current-max-ms")
	lat.report(b, "commit-", false)
	b.ReportMetric(w.lists, "lists")
	b.ReportMetric(w.initial, "initial-watches")
	b.ReportMetric(float64(clientRelists), "client-relists")
	b.ReportMetric(w.databaseReads, "history-db-reads")
	b.ReportMetric(w.memoryReads, "history-memory-reads")
	b.ReportMetric(float64(responses["401"]+responses["403"]), "client-401-403s")
	b.ReportMetric(float64(responses["429"]), "client-429s")

	section := fmt.Sprintf("watch resume storm: %d informers (selector %s=%s) on one platform-apiserver's port, %d restart(s) (worst restart's counts; goal: no LIST, no relist, a handful of history queries at most)",
		informers, platform.ClusterLabel, resumeCluster, len(ops))
	summary.printf(section, "restart until ready %s mean (%s max); every informer holds the change made after it %s after the restart began, mean (%s max)",
		restartMean.Round(time.Millisecond), restartMax.Round(time.Millisecond), allCurrentMean.Round(time.Millisecond), allCurrentMax.Round(time.Millisecond))
	summary.printf(section, "from the change's commit to an informer: %s", lat)
	summary.printf(section, "restarted server: %.0f LISTs, %.0f watches with initial events, ≥%.0f resuming watches, history %.0f from memory, %.0f database queries (%.0f shared), %.0f 429s, %.0f 503s; informers relisted %d times  %s",
		w.lists, w.initial, w.resumes, w.memoryReads, w.databaseReads, w.sharedReads, w.tooManyRequests, w.notReady503, clientRelists,
		verdict(w.lists == 0 && w.initial == 0 && clientRelists == 0 && w.databaseReads <= 5))
	summary.printf(section, "the informers' requests over all restarts: %s", responses)
}
