package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/test/framework"
)

// TestWatchAtScale: informers that fall behind resume instead of
// relisting, a namespace-scoped watcher costs nothing for other
// namespaces, and a thousand informers resume after a restart of their
// replica without a list, served from its window of recent changes;
// resumes older than the window share a few kind-filtered history queries.
func TestWatchAtScale(t *testing.T) {
	t.Parallel()
	e := setupWith(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		// As a Deployment runs it: while it shuts down it answers 429, which
		// clients retry, instead of 503, which would make them relist.
		ExtraPlatformArgs: []string{"--watch-buffer=100", "--watch-poll-interval=200ms",
			"--shutdown-delay-duration=1s", "--shutdown-send-retry-after"},
	})
	t.Run("an informer that falls behind resumes without a list", e.testSlowInformer)
	t.Run("a namespace-scoped watcher", e.testNamespaceScopedWatch)
	t.Run("200 watches resume below the window", e.testResumesBelowTheWindow)
	t.Run("a tenant's resumes leave other users their history reads", e.testTenantResumes)
	t.Run("a thousand informers resume after a restart", e.testResumeStorm)
}

// nodeInformer is a NodeCapacity informer over client whose event intake
// can be held: while held, its first watch stream is not read, so the
// server sees a client that falls behind (a slow handler in a controller
// that reads its watch synchronously, or a starved process). Later
// watches (its resumes) are never held: a client that never reads is
// closed at once each time, and client-go relists after a watch that ends
// within a second without an event.
type nodeInformer struct {
	informer cache.SharedIndexInformer
	held     atomic.Bool
	watches  atomic.Int32
}

func newNodeInformer(client versioned.Interface, selector string) *nodeInformer {
	ni := &nodeInformer{}
	ncs := client.PlatformV1alpha1().NodeCapacities()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = selector
			return ncs.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			w, err := ncs.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return ni.holdable(w), nil
		},
	}
	ni.informer = cache.NewSharedIndexInformer(lw, &v1alpha1.NodeCapacity{}, 0, cache.Indexers{})
	return ni
}

// holdable relays w's events, pausing while the informer is held if w is
// its first watch.
func (ni *nodeInformer) holdable(w watch.Interface) watch.Interface {
	out := make(chan watch.Event)
	stop := make(chan struct{})
	first := ni.watches.Add(1) == 1
	go func() {
		defer close(out)
		for ev := range w.ResultChan() {
			for first && ni.held.Load() {
				time.Sleep(10 * time.Millisecond)
			}
			select {
			case out <- ev:
			case <-stop:
				return
			}
		}
	}()
	var once sync.Once
	return watch.MockWatcher{
		StopFunc:       func() { once.Do(func() { close(stop); w.Stop() }) },
		ResultChanFunc: func() <-chan watch.Event { return out },
	}
}

// listAndInitialWatches counts the server's NodeCapacity lists and watches
// with initial events (client-go's two ways to relist).
func (e *env) listAndInitialWatches(t *testing.T, metrics func(context.Context) (string, error)) (float64, float64) {
	t.Helper()
	body, err := metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lists, err := framework.MetricSum(body, "apiserver_request_total", `verb="LIST"`, `resource="nodecapacities"`)
	if err != nil {
		t.Fatal(err)
	}
	initial, err := framework.MetricSum(body, "platform_watch_requests_total", `kind="NodeCapacity"`, `start="initial"`)
	if err != nil {
		t.Fatal(err)
	}
	return lists, initial
}

func (e *env) metric(t *testing.T, metrics func(context.Context) (string, error), name string, labels ...string) float64 {
	t.Helper()
	body, err := metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	v, err := framework.MetricSum(body, name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// burstNodes writes nodes first..first+n-1 of cluster in batches: n changes.
func (e *env) burstNodes(t *testing.T, cluster string, first, n int) {
	t.Helper()
	const batch = 500
	for i := first; i < first+n; i += batch {
		var nodes []store.Node
		for j := i; j < min(i+batch, first+n); j++ {
			nodes = append(nodes, node(fmt.Sprintf("b%05d", j)))
		}
		e.apply(t, store.Batch{ClusterID: cluster, Nodes: nodes})
	}
}

func (e *env) testSlowInformer(t *testing.T) {
	ctx := t.Context()
	if os.Getenv("WATCH_SCALE_DEBUG") != "" {
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("v", "4")
	}
	const burst = 5000
	selector := platform.ClusterLabel + "=burst"
	ni := newNodeInformer(e.platform, selector)
	go ni.informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), ni.informer.HasSynced) {
		t.Fatal("informer did not sync")
	}
	lists, initial := e.listAndInitialWatches(t, e.cp.PlatformMetrics)
	closedBefore := e.metric(t, e.cp.PlatformMetrics, "platform_watch_watchers_closed_behind_total")

	// Bursts of 5,000 changes until the server closes the held watch: the
	// buffers between it and the client (proxy, HTTP/2 windows) absorb some.
	ni.held.Store(true)
	written := 0
	for closed := false; !closed; {
		if written >= 4*burst {
			t.Fatalf("the held informer's watch was not closed after %d changes", written)
		}
		e.burstNodes(t, "burst", written, burst)
		written += burst
		deadline := time.Now().Add(5 * time.Second)
		for !closed && time.Now().Before(deadline) {
			closed = e.metric(t, e.cp.PlatformMetrics, "platform_watch_watchers_closed_behind_total") > closedBefore
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("the held informer's watch was closed after a burst of %d changes", written)
	ni.held.Store(false)

	eventually(t, "the informer caught up", time.Minute, func(context.Context) (bool, string) {
		n := len(ni.informer.GetStore().ListKeys())
		return n == written, fmt.Sprintf("%d objects, want %d", n, written)
	})
	listsAfter, initialAfter := e.listAndInitialWatches(t, e.cp.PlatformMetrics)
	if listsAfter != lists || initialAfter != initial {
		body, _ := e.cp.PlatformMetrics(ctx)
		var watches []string
		for line := range strings.Lines(body) {
			if strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `resource="nodecapacities"`) ||
				strings.HasPrefix(line, "platform_watch_requests_total{") || strings.HasPrefix(line, "platform_watch_history_reads_total{") {
				watches = append(watches, strings.TrimSpace(line))
			}
		}
		t.Errorf("the informer relisted: lists %v → %v, watches with initial events %v → %v; want it to resume. Server:\n%s",
			lists, listsAfter, initial, initialAfter, strings.Join(watches, "\n"))
	}
	// Exact: the registry's objects at their resourceVersions (this list
	// comes after the counts above).
	want, err := e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Items) != written {
		t.Fatalf("registry has %d burst nodes, want %d", len(want.Items), written)
	}
	eventually(t, "the informer holds exactly the registry's state", time.Minute, func(context.Context) (bool, string) {
		for _, nc := range want.Items {
			obj, ok, _ := ni.informer.GetStore().GetByKey(nc.Name)
			if !ok || obj.(*v1alpha1.NodeCapacity).ResourceVersion != nc.ResourceVersion {
				return false, "differs at " + nc.Name
			}
		}
		return true, ""
	})
}

func (e *env) testNamespaceScopedWatch(t *testing.T) {
	ctx := t.Context()
	cns := e.platform.PlatformV1alpha1().ClusterNamespaces("team-scoped")
	list, err := cns.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cns.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	before := e.metric(t, e.cp.PlatformMetrics, "platform_watch_conversions_total", `kind="ClusterNamespace"`)
	var others []store.Namespace
	for i := range 500 {
		others = append(others, store.Namespace{Name: fmt.Sprintf("other-%03d", i), UID: fmt.Sprint("o", i), Phase: "Active"})
	}
	e.apply(t, store.Batch{ClusterID: "scoped", Namespaces: others})
	e.apply(t, store.Batch{ClusterID: "scoped", Namespaces: []store.Namespace{{Name: "team-scoped", UID: "ts", Phase: "Active"}}})
	got := collect(t, w, 1)
	if cn := got[0].Object.(*v1alpha1.ClusterNamespace); got[0].Type != watch.Added || cn.Namespace != "team-scoped" {
		t.Errorf("scoped watcher got %s %s/%s, want ADDED team-scoped/scoped", got[0].Type, cn.Namespace, cn.Name)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Bookmark {
			t.Errorf("scoped watcher got a further %s event", ev.Type)
		}
	case <-time.After(time.Second):
	}
	if d := e.metric(t, e.cp.PlatformMetrics, "platform_watch_conversions_total", `kind="ClusterNamespace"`) - before; d != 1 {
		t.Errorf("%v ClusterNamespace conversions for 501 changes and one watcher of one namespace, want 1", d)
	}
}

func (e *env) testResumeStorm(t *testing.T) {
	ctx := t.Context()
	const informers = 1000
	cfg := e.cp.PlatformDirectConfig()
	cfg.QPS, cfg.Burst = 2000, 2000
	client := versioned.NewForConfigOrDie(cfg)
	e.burstNodes(t, "storm", 0, 10)
	selector := platform.ClusterLabel + "=storm"
	all := make([]*nodeInformer, informers)
	for i := range all {
		all[i] = newNodeInformer(client, selector)
		go all[i].informer.Run(ctx.Done())
	}
	for _, ni := range all {
		if !cache.WaitForCacheSync(ctx.Done(), ni.informer.HasSynced) {
			t.Fatal("informer did not sync")
		}
	}

	restarted := time.Now()
	if err := e.cp.RestartPlatformAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	// A change after the restart: every informer must see it.
	e.apply(t, store.Batch{ClusterID: "storm", Nodes: []store.Node{node("after-restart")}})
	eventually(t, "every informer current after the restart", 2*time.Minute, func(context.Context) (bool, string) {
		behind := 0
		for _, ni := range all {
			if _, ok, _ := ni.informer.GetStore().GetByKey("storm.after-restart"); !ok {
				behind++
			}
		}
		return behind == 0, fmt.Sprintf("%d of %d informers behind", behind, informers)
	})
	t.Logf("%d informers current %s after the restart began", informers, time.Since(restarted).Round(10*time.Millisecond))

	lists, initial := e.listAndInitialWatches(t, e.cp.PlatformMetrics)
	resumes := e.metric(t, e.cp.PlatformMetrics, "platform_watch_requests_total", `kind="NodeCapacity"`, `start="resume"`)
	database := e.metric(t, e.cp.PlatformMetrics, "platform_watch_history_reads_total", `source="database"`)
	memory := e.metric(t, e.cp.PlatformMetrics, "platform_watch_history_reads_total", `source="memory"`)
	t.Logf("restarted replica: %v lists, %v watches with initial events, %v resumes, history reads: %v from memory, %v from the database",
		lists, initial, resumes, memory, database)
	if lists != 0 || initial != 0 {
		t.Errorf("after the restart: %v lists and %v watches with initial events; want every informer to resume", lists, initial)
	}
	if resumes < informers {
		t.Errorf("%v resuming watches, want at least %d", resumes, informers)
	}
	if database > 5 {
		t.Errorf("%v history queries for %d resuming informers, want a handful at most", database, informers)
	}
}
