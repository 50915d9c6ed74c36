package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/informers/externalversions"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/test/framework"
)

// TestWatch covers watch semantics through the aggregator on a stack of its
// own, with short bookmark and poll intervals.
func TestWatch(t *testing.T) {
	t.Parallel()
	e := setupWith(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		ExtraPlatformArgs:       []string{"--watch-bookmark-interval=1s", "--watch-poll-interval=200ms"},
	})
	t.Run("kubectl get -w", e.testKubectlWatch)
	t.Run("selectors", e.testWatchSelectors)
	t.Run("resume and bookmarks", e.testWatchResume)
	t.Run("churn from concurrent writers", e.testWatchChurn)
}

// TestInformer runs a generated informer against two replicas sharing one
// port, so one serves while the other restarts, as behind a Service. The
// default bookmark interval (1m) keeps the informer's resourceVersion at its
// last NodeCapacity event, so compaction can overtake it.
func TestInformer(t *testing.T) {
	t.Parallel()
	e := setupWith(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		// As a Deployment would run it: on SIGTERM keep serving for a moment,
		// then answer 429 (which clients retry) until in-flight requests end.
		ExtraPlatformArgs: []string{"--permit-port-sharing", "--shutdown-delay-duration=1s", "--shutdown-send-retry-after"},
	})
	e.testInformer(t)
}

// kubectlStream starts kubectl and returns its stdout lines as they come.
func (e *env) kubectlStream(t *testing.T, args ...string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cmd := exec.CommandContext(ctx, filepath.Join(e.cp.BinDir(), "kubectl"), append([]string{"--kubeconfig", e.cp.AdminKubeconfig()}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	return lines
}

// expectLine waits for a line containing every part.
func expectLine(t *testing.T, lines <-chan string, parts ...string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	var seen []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stream ended waiting for %q; saw:\n%s", parts, strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			match := true
			for _, p := range parts {
				match = match && strings.Contains(l, p)
			}
			if match {
				return l
			}
		case <-timeout:
			t.Fatalf("no line with %q in 30s; saw:\n%s", parts, strings.Join(seen, "\n"))
		}
	}
}

func (e *env) apply(t *testing.T, b store.Batch) {
	t.Helper()
	if err := e.store.Apply(t.Context(), b); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

func (e *env) testKubectlWatch(t *testing.T) {
	nodes := e.kubectlStream(t, "get", "nodecapacities", "-w", "--output-watch-events")
	expectLine(t, nodes, "ADDED", "prod-1.n1", "3/110") // initial state
	namespaces := e.kubectlStream(t, "get", "clusternamespaces", "-A", "-w", "--output-watch-events")
	expectLine(t, namespaces, "ADDED", "team-a", "prod-1")

	w := node("w1")
	e.apply(t, store.Batch{ClusterID: "watch", Nodes: []store.Node{w}, Namespaces: []store.Namespace{{Name: "team-w", UID: "tw", Phase: "Active"}}})
	expectLine(t, nodes, "ADDED", "watch.w1", "0/110")
	expectLine(t, namespaces, "ADDED", "team-w", "watch")

	// A pod bound to the node changes the NodeCapacity and the namespace.
	e.apply(t, store.Batch{ClusterID: "watch", Pods: []store.Pod{{Namespace: "team-w", Name: "p", UID: "p", NodeName: "w1", Phase: "Running", CPURequestMillis: 100}}})
	expectLine(t, nodes, "MODIFIED", "watch.w1", "1/110")
	expectLine(t, namespaces, "MODIFIED", "team-w", "watch")

	e.apply(t, store.Batch{ClusterID: "watch", Deleted: store.Keys{store.ResourceNodes: {{Name: "w1"}}, store.ResourceNamespaces: {{Name: "team-w"}}}})
	expectLine(t, nodes, "DELETED", "watch.w1")
	expectLine(t, namespaces, "DELETED", "team-w", "watch")
}

// collect reads a watch until it has n events of types other than BOOKMARK.
func collect(t *testing.T, w watch.Interface, n int) []watch.Event {
	t.Helper()
	var got []watch.Event
	timeout := time.After(60 * time.Second)
	for len(got) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %d of %d events", len(got), n)
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", ev.Object)
			}
			if ev.Type != watch.Bookmark {
				got = append(got, ev)
			}
		case <-timeout:
			t.Fatalf("timed out after %d of %d events", len(got), n)
		}
	}
	return got
}

func (e *env) testWatchSelectors(t *testing.T) {
	ctx := t.Context()
	ncs := e.platform.PlatformV1alpha1().NodeCapacities()
	list, err := ncs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := ncs.Watch(ctx, metav1.ListOptions{LabelSelector: "team=blue", FieldSelector: "status.cluster=sel", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	blue, red := node("s1"), node("s2")
	blue.Labels["team"], red.Labels["team"] = "blue", "red"
	e.apply(t, store.Batch{ClusterID: "sel", Nodes: []store.Node{blue, red}})
	blue.Labels["team"] = "red" // stops matching
	e.apply(t, store.Batch{ClusterID: "sel", Nodes: []store.Node{blue}})
	red.Labels["team"] = "blue" // starts matching
	e.apply(t, store.Batch{ClusterID: "sel", Nodes: []store.Node{red}})
	e.apply(t, store.Batch{ClusterID: "other", Nodes: []store.Node{node("s3")}}) // never matches
	e.apply(t, store.Batch{ClusterID: "sel", Deleted: store.Keys{store.ResourceNodes: {{Name: "s2"}}}})

	want := []struct {
		typ  watch.EventType
		name string
	}{
		{watch.Added, "sel.s1"},
		{watch.Deleted, "sel.s1"}, // stopped matching: DELETED with its last matching state
		{watch.Added, "sel.s2"},   // started matching
		{watch.Deleted, "sel.s2"},
	}
	got := collect(t, w, len(want))
	for i, ev := range got {
		nc := ev.Object.(*v1alpha1.NodeCapacity)
		if ev.Type != want[i].typ || nc.Name != want[i].name {
			t.Errorf("event %d = %s %s, want %s %s", i, ev.Type, nc.Name, want[i].typ, want[i].name)
		}
	}
	if nc := got[1].Object.(*v1alpha1.NodeCapacity); nc.Labels["team"] != "blue" {
		t.Errorf("DELETED for a no longer matching object carries labels %v, want its last matching state", nc.Labels)
	}
}

func (e *env) testWatchResume(t *testing.T) {
	ctx := t.Context()
	ncs := e.platform.PlatformV1alpha1().NodeCapacities()
	list, err := ncs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Three changes made before the watch starts are replayed from history.
	for i := range 3 {
		n := node("r1")
		n.Labels["gen"] = strconv.Itoa(i)
		e.apply(t, store.Batch{ClusterID: "resume", Nodes: []store.Node{n}})
	}
	w, err := ncs.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true, FieldSelector: "status.cluster=resume"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got := collect(t, w, 3)
	if got[0].Type != watch.Added || got[1].Type != watch.Modified || got[2].Object.(*v1alpha1.NodeCapacity).Labels["gen"] != "2" {
		t.Errorf("replayed events = %v", got)
	}
	cur, err := ncs.Get(ctx, "resume.r1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if last := got[2].Object.(*v1alpha1.NodeCapacity); last.ResourceVersion != cur.ResourceVersion {
		t.Errorf("last event resourceVersion %s, get says %s", last.ResourceVersion, cur.ResourceVersion)
	}
	// Bookmarks arrive (every second here) with a version at least the last event's.
	err = wait.PollUntilContextTimeout(ctx, 0, 30*time.Second, true, func(context.Context) (bool, error) {
		ev := <-w.ResultChan()
		if ev.Type != watch.Bookmark {
			return false, fmt.Errorf("unexpected %s event", ev.Type)
		}
		rv, _ := strconv.ParseInt(ev.Object.(*v1alpha1.NodeCapacity).ResourceVersion, 10, 64)
		last, _ := strconv.ParseInt(cur.ResourceVersion, 10, 64)
		return rv >= last, nil
	})
	if err != nil {
		t.Errorf("bookmark: %v", err)
	}

	// sendInitialEvents: the current objects, then a bookmark marking their end.
	yes := true
	w2, err := ncs.Watch(ctx, metav1.ListOptions{SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true, FieldSelector: "status.cluster=prod-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	added := 0
	for ev := range w2.ResultChan() {
		if ev.Type == watch.Added {
			added++
			continue
		}
		if ev.Type != watch.Bookmark || ev.Object.(*v1alpha1.NodeCapacity).Annotations[metav1.InitialEventsAnnotationKey] != "true" {
			t.Fatalf("after %d ADDED got %s %v, want the initial-events-end bookmark", added, ev.Type, ev.Object)
		}
		break
	}
	if added != 4 {
		t.Errorf("sendInitialEvents delivered %d objects of prod-1, want 4", added)
	}
}

// testWatchChurn makes 10,000 changes from concurrent writers and checks
// that every watcher sees each exactly once, in order.
func (e *env) testWatchChurn(t *testing.T) {
	ctx := t.Context()
	ncs := e.platform.PlatformV1alpha1().NodeCapacities()
	list, err := ncs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const writers, rounds, nodesPerApply = 8, 125, 10 // 8*125*10 = 10,000 changes
	var watchers []watch.Interface
	for range 3 {
		w, err := ncs.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "status.cluster!=prod-1"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		watchers = append(watchers, w)
	}

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for wr := range writers {
		wg.Go(func() {
			for r := range rounds {
				b := store.Batch{ClusterID: fmt.Sprintf("churn-%d", wr)}
				for n := range nodesPerApply {
					nd := node(fmt.Sprintf("c%d", n))
					nd.Labels["round"] = strconv.Itoa(r)
					b.Nodes = append(b.Nodes, nd)
				}
				if err := e.store.Apply(ctx, b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	const total = writers * rounds * nodesPerApply
	for i, w := range watchers {
		got := collect(t, w, total)
		var last int64
		seen := map[int64]bool{}
		for _, ev := range got {
			nc := ev.Object.(*v1alpha1.NodeCapacity)
			rv, _ := strconv.ParseInt(nc.ResourceVersion, 10, 64)
			if rv <= last || seen[rv] {
				t.Fatalf("watcher %d: resourceVersion %d after %d: out of order or repeated", i, rv, last)
			}
			seen[rv], last = true, rv
		}
	}
	// The last event of each object carries what a get returns.
	final, err := ncs.List(ctx, metav1.ListOptions{LabelSelector: "round=" + strconv.Itoa(rounds-1)})
	if err != nil || len(final.Items) != writers*nodesPerApply {
		t.Fatalf("final list: %d items, %v", len(final.Items), err)
	}
}

func (e *env) testInformer(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	factory := externalversions.NewSharedInformerFactory(e.platform, 0)
	informer := factory.Platform().V1alpha1().NodeCapacities().Informer()
	var mu sync.Mutex
	adds, updates, deletes := map[string]int{}, map[string]int{}, map[string]int{}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { mu.Lock(); adds[obj.(*v1alpha1.NodeCapacity).Name]++; mu.Unlock() },
		UpdateFunc: func(_, obj any) {
			mu.Lock()
			updates[obj.(*v1alpha1.NodeCapacity).Name]++
			mu.Unlock()
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			mu.Lock()
			deletes[obj.(*v1alpha1.NodeCapacity).Name]++
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer never synced")
	}
	count := func(m map[string]int, name string) int { mu.Lock(); defer mu.Unlock(); return m[name] }
	eventually := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	if count(adds, "prod-1.n1") != 1 {
		t.Fatalf("initial sync: prod-1.n1 added %d times", count(adds, "prod-1.n1"))
	}
	e.apply(t, store.Batch{ClusterID: "inf", Nodes: []store.Node{node("i1")}})
	eventually("add", func() bool { return count(adds, "inf.i1") == 1 })
	i1 := node("i1")
	i1.Unschedulable = true
	e.apply(t, store.Batch{ClusterID: "inf", Nodes: []store.Node{i1}})
	eventually("update", func() bool { return count(updates, "inf.i1") == 1 })

	// Restart each replica in turn: the informer's watch breaks at least
	// once and resumes on the other replica from its resourceVersion, so
	// changes made meanwhile arrive and nothing else is re-delivered.
	replica, err := e.cp.StartPlatformReplica(ctx, "platform-apiserver-2")
	if err != nil {
		t.Fatal(err)
	}
	restartBoth := func(next string) {
		t.Helper()
		if err := e.cp.RestartPlatformAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		if err := replica.Stop(); err != nil {
			t.Fatal(err)
		}
		if replica, err = e.cp.StartPlatformReplica(ctx, next); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = replica.Stop() })
	e.apply(t, store.Batch{ClusterID: "inf", Deleted: store.Keys{store.ResourceNodes: {{Name: "i1"}}}, Nodes: []store.Node{node("i2")}})
	restartBoth("platform-apiserver-3")
	eventually("delete", func() bool { return count(deletes, "inf.i1") == 1 })
	eventually("add", func() bool { return count(adds, "inf.i2") == 1 })
	e.apply(t, store.Batch{ClusterID: "inf", Nodes: []store.Node{node("i3")}})
	eventually("add after restarts", func() bool { return count(adds, "inf.i3") == 1 })
	if n := count(updates, "prod-1.n1"); n != 0 {
		t.Errorf("prod-1.n1 was re-delivered %d times across restarts: the informer relisted instead of resuming", n)
	}

	// Move the registry on without NodeCapacity changes and compact all
	// history: the informer's resourceVersion is now too old, its next
	// watch gets 410 and it relists, which re-delivers every object.
	e.apply(t, store.Batch{ClusterID: "inf", Namespaces: []store.Namespace{{Name: "only-ns", UID: "ns", Phase: "Active"}}})
	if _, err := e.store.Compact(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	restartBoth("platform-apiserver-4")
	eventually("relist after 410", func() bool { return count(updates, "prod-1.n1") >= 1 })
	if _, err := e.platform.PlatformV1alpha1().NodeCapacities().Watch(ctx, metav1.ListOptions{ResourceVersion: "1"}); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("watch from a compacted resourceVersion: %v, want 410", err)
	}
	page, err := e.store.NodeCapacities().List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(informer.GetStore().ListKeys()); got != len(page.Items) {
		t.Errorf("informer holds %d objects, registry %d", got, len(page.Items))
	}
}
