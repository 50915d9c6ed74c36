package integration

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/pkg/generated/informers/externalversions"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/test/framework"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestRegistryStandbyServesReplicas: two API replicas read from a streaming
// standby. A list at a resourceVersion just written on the primary returns
// the write, whichever replica answers, also while the standby replays
// nothing (the primary answers then, and readiness reports the lag); list
// versions a client sees never go backwards across replicas, nor does an
// informer's; and the standby serves reads.
func TestRegistryStandbyServesReplicas(t *testing.T) {
	t.Parallel()
	primary := pgtest.NewInstance(t, pgtest.Options{})
	standby := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	// As the chart passes it: from a file (a mounted Secret).
	readDSNFile := filepath.Join(t.TempDir(), "read-0")
	if err := os.WriteFile(readDSNFile, []byte(standby.DSN()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		DatabaseURL:             primary.DSN(),
		ExtraPlatformArgs:       []string{"--permit-port-sharing", "--postgres-read-dsn-file=" + readDSNFile, "--postgres-standby-max-lag=1s"},
	})
	ctx := t.Context()
	replica, err := e.cp.StartPlatformReplica(ctx, "platform-apiserver-2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Stop() })

	informer, lastSync := monotonicInformer(t, e.platform)
	ncs := e.platform.PlatformV1alpha1().NodeCapacities()
	var lastListRV int64
	const writes = 40
	for i := range writes {
		switch i {
		case 15:
			setStandbyReplay(t, standby, false)
		case 30:
			setStandbyReplay(t, standby, true)
		}
		e.apply(t, store.Batch{ClusterID: "ha", Nodes: []store.Node{node(fmt.Sprintf("s%02d", i))}})
		written := registryPresent(t, e)
		want := fmt.Sprintf("ha.s%02d", i)
		for _, opts := range []metav1.ListOptions{
			{ResourceVersion: strconv.FormatInt(written, 10), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
			{}, // the latest
		} {
			list, err := ncs.List(ctx, opts)
			if err != nil {
				t.Fatalf("write %d: list %+v: %v", i, opts, err)
			}
			rv, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
			if rv < written || !slices.ContainsFunc(list.Items, func(nc v1alpha1.NodeCapacity) bool { return nc.Name == want }) {
				t.Fatalf("write %d at %d: list %+v answered at %d without %s", i, written, opts, rv, want)
			}
			if rv < lastListRV {
				t.Fatalf("write %d: a list answered at %d after one at %d: the resourceVersion went backwards", i, rv, lastListRV)
			}
			lastListRV = rv
		}
		if i == 29 {
			// The standby has replayed nothing since write 15, more than
			// --postgres-standby-max-lag ago: readiness says so.
			eventually(t, "readiness reports the lagging standby", 30*time.Second, func(ctx context.Context) (bool, string) {
				code, body, err := getAsAdmin(ctx, e.cp, "/readyz/registry-standbys")
				return err == nil && code == http.StatusInternalServerError && strings.Contains(body, "behind the primary (limit 1s"), fmt.Sprint(code, body, err)
			})
			// Anonymous probes see that the check fails, not why. Eventually
			// too: the two replicas share the port and each caches its check
			// for a second, so the other may not have seen the lag yet.
			eventually(t, "anonymous readiness reports the failing check", 30*time.Second, func(ctx context.Context) (bool, string) {
				code, body, err := probePlatform(ctx, e.cp, "/readyz?verbose")
				return err == nil && code == http.StatusInternalServerError && strings.Contains(body, "[-]registry-standbys failed") &&
					!strings.Contains(body, "behind the primary"), fmt.Sprint(code, body, err)
			})
			if code, _, err := probePlatform(ctx, e.cp, "/readyz?exclude=registry-standbys"); err != nil || code != http.StatusOK {
				t.Errorf("/readyz?exclude=registry-standbys (the install's probe) with a lagging standby: %d %v, want 200", code, err)
			}
		}
	}
	eventually(t, "readiness passes once the standby caught up", 30*time.Second, func(ctx context.Context) (bool, string) {
		code, body, err := getAsAdmin(ctx, e.cp, "/readyz/registry-standbys")
		return err == nil && code == http.StatusOK, fmt.Sprint(code, body, err)
	})
	last, err := ncs.Get(ctx, fmt.Sprintf("ha.s%02d", writes-1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The registry's present may be a change of another kind, which this
	// informer's watch has no event for: it syncs to its last NodeCapacity.
	final, _ := strconv.ParseInt(last.ResourceVersion, 10, 64)
	eventually(t, "the informer holds every write", 30*time.Second, func(context.Context) (bool, string) {
		n := 0
		for _, key := range informer.GetStore().ListKeys() {
			if strings.HasPrefix(key, "ha.") {
				n++
			}
		}
		return n == writes && lastSync() >= final, fmt.Sprintf("%d of %d objects, synced to %d of %d", n, writes, lastSync(), final)
	})
	// Caught up, the standby takes its turns (a replica that found it
	// lagging asks it again at each turn; either replica may answer here).
	eventually(t, "reads served by the standby", 30*time.Second, func(ctx context.Context) (bool, string) {
		if _, err := ncs.List(ctx, metav1.ListOptions{}); err != nil {
			return false, err.Error()
		}
		n, err := e.platformMetric(ctx, "platform_registry_reads_total", `server="standby"`)
		return err == nil && n > 0, fmt.Sprint(n, err)
	})
}

// TestRegistryFailover: discovery mirrors the hosting cluster while nodes
// are created and changed; the standby stops receiving WAL, the primary
// commits more (watchers see it), dies, and the standby is promoted. The
// failover loses those commits: discovery claims its member again and
// mirrors them anew, every watcher either resumes without missing a change
// or gets 410 and relists, and in the end the mirror equals the member and
// every watcher and informer holds exactly what a list returns.
func TestRegistryFailover(t *testing.T) {
	oneFaultTestAtATime(t)
	primary := pgtest.NewInstance(t, pgtest.Options{})
	standby := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		DatabaseURL:             pgtest.MultiHostDSN("", "read-write", primary, standby.Instance),
		ExtraPlatformArgs: []string{
			"--cluster-id=local",
			"--kubeconfig=kubeconfig",
			"--discovery-batch-delay=50ms",
			"--postgres-read-dsn=" + standby.DSN(),
		},
	})
	ctx := t.Context()
	eventually(t, "mirror before the failover", mirrorTimeout, func(ctx context.Context) (bool, string) {
		d := e.mirrorDiff(ctx, "local")
		return d == "", d
	})
	informer, _ := monotonicInformer(t, e.platform)
	watchers := make([]*relistingWatcher, 3)
	for i := range watchers {
		watchers[i] = startRelistingWatcher(t, e.platform)
	}

	// Nodes created and changed throughout, through the member's API.
	wctx, stopWrites := context.WithCancel(ctx)
	var writes sync.WaitGroup
	var created []string
	var mu sync.Mutex
	writes.Go(func() {
		for i := 0; wctx.Err() == nil; i++ {
			name := fmt.Sprintf("fo-%03d", i)
			if _, err := e.kube.CoreV1().Nodes().Create(wctx, testNode(name), metav1.CreateOptions{}); err == nil {
				mu.Lock()
				created = append(created, name)
				mu.Unlock()
			}
			if i%3 == 2 {
				_, _ = e.kube.CoreV1().Nodes().Patch(wctx, fmt.Sprintf("fo-%03d", i-2), "application/merge-patch+json",
					[]byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
			}
			select {
			case <-wctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	lastCreated := func() string { mu.Lock(); defer mu.Unlock(); return created[len(created)-1] }
	// createdMore waits until n more nodes than now have been created.
	createdMore := func(what string, n int) {
		t.Helper()
		mu.Lock()
		want := len(created) + n
		mu.Unlock()
		eventually(t, what, 2*mirrorTimeout, func(context.Context) (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(created) >= want, fmt.Sprintf("%d nodes created, want %d", len(created), want)
		})
	}
	createdMore("writes under way", 10)

	// The standby receives nothing more; what the primary commits now is
	// lost in the failover, after watchers saw it.
	if err := standby.Pause(); err != nil {
		t.Fatal(err)
	}
	createdMore("writes the standby never receives", 10)
	seen := lastCreated()
	eventually(t, "watchers see changes the standby never receives", mirrorTimeout, func(context.Context) (bool, string) {
		for i, w := range watchers {
			if !w.has("local." + seen) {
				return false, fmt.Sprintf("watcher %d lacks %s", i, seen)
			}
		}
		return true, ""
	})
	if err := standby.FailOverPaused(ctx); err != nil {
		t.Fatal(err)
	}
	createdMore("writes after the promotion", 10)
	stopWrites()
	writes.Wait()

	eventually(t, "mirror after the failover", 2*mirrorTimeout, func(ctx context.Context) (bool, string) {
		d := e.mirrorDiff(ctx, "local")
		return d == "", d
	})
	var failovers int64
	conn, err := pgx.Connect(ctx, standby.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT failovers FROM registry_epoch`).Scan(&failovers); err != nil || failovers != 1 {
		t.Errorf("failovers recorded: %d, %v; want 1", failovers, err)
	}
	if n, err := e.platformMetric(ctx, "platform_discovery_member_rewinds_total", `cluster="local"`); err != nil || n < 1 {
		t.Errorf("discovery claims after the failover (member_rewinds_total): %v, %v; want at least 1", n, err)
	}

	list, err := e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, nc := range list.Items {
		want[nc.Name] = nc.ResourceVersion
	}
	relists := 0
	for i, w := range watchers {
		eventually(t, fmt.Sprintf("watcher %d holds what a list returns", i), mirrorTimeout, func(context.Context) (bool, string) {
			got := w.snapshot()
			return maps.Equal(got, want), fmt.Sprintf("watcher %d: %v\nlist: %v", i, got, want)
		})
		if errs := w.problems(); len(errs) > 0 {
			t.Errorf("watcher %d: %s", i, strings.Join(errs, "; "))
		}
		relists += w.relistCount()
		t.Logf("watcher %d relisted %d times after 410", i, w.relistCount())
	}
	if relists == 0 {
		t.Errorf("no watcher got 410 after the failover, though each saw %s, which the failover lost", seen)
	}
	eventually(t, "the informer holds what a list returns", mirrorTimeout, func(context.Context) (bool, string) {
		got := informerVersions(informer)
		return maps.Equal(got, want), fmt.Sprintf("informer: %v\nlist: %v", got, want)
	})
}

// registryPresent is the registry's resourceVersion on the primary.
func registryPresent(t *testing.T, e *env) int64 {
	t.Helper()
	_, rv, err := e.store.Changes(t.Context(), store.ChangeFilter{}, 1<<62, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

// setStandbyReplay pauses or resumes WAL replay on a standby; it keeps
// answering queries with what it replayed.
func setStandbyReplay(t *testing.T, sb *pgtest.Standby, on bool) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), sb.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	fn := "pg_wal_replay_pause()"
	if on {
		fn = "pg_wal_replay_resume()"
	}
	if _, err := conn.Exec(t.Context(), "SELECT "+fn); err != nil {
		t.Fatal(err)
	}
}

// monotonicInformer starts a NodeCapacity informer through the aggregator
// and fails the test if the resourceVersion it last synced to ever goes
// backwards; lastSync reads that version.
func monotonicInformer(t *testing.T, client versioned.Interface) (informer cache.SharedIndexInformer, lastSync func() int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	factory := externalversions.NewSharedInformerFactory(client, 0)
	informer = factory.Platform().V1alpha1().NodeCapacities().Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer never synced")
	}
	var mu sync.Mutex
	var last int64
	var backwards string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			rv, _ := strconv.ParseInt(informer.LastSyncResourceVersion(), 10, 64)
			mu.Lock()
			if rv < last && backwards == "" {
				backwards = fmt.Sprintf("the informer synced to %d after %d", rv, last)
			}
			last = max(last, rv)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if backwards != "" {
			t.Errorf("resourceVersion went backwards: %s", backwards)
		}
	})
	return informer, func() int64 { mu.Lock(); defer mu.Unlock(); return last }
}

// relistingWatcher keeps NodeCapacities as a client without an informer
// would: list, watch from the list's version, resume from the last version
// seen when a watch ends, relist on 410. Within an unbroken run of watches
// (no relist between) every event's version must be above the last.
type relistingWatcher struct {
	mu      sync.Mutex
	items   map[string]string
	relists int
	errs    []string
}

func startRelistingWatcher(t *testing.T, client versioned.Interface) *relistingWatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := &relistingWatcher{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx, client)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *relistingWatcher) run(ctx context.Context, client versioned.Interface) {
	ncs := client.PlatformV1alpha1().NodeCapacities()
	var rv int64
	relist := true
	for ctx.Err() == nil {
		if relist {
			list, err := ncs.List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			items := map[string]string{}
			for _, nc := range list.Items {
				items[nc.Name] = nc.ResourceVersion
			}
			rv, _ = strconv.ParseInt(list.ResourceVersion, 10, 64)
			w.mu.Lock()
			w.items = items
			w.mu.Unlock()
			relist = false
		}
		wi, err := ncs.Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10), AllowWatchBookmarks: true})
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			w.gone()
			relist = true
			continue
		}
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		rv, relist = w.follow(wi, rv)
		wi.Stop()
	}
}

// follow applies one watch's events; it returns the version to resume
// from and whether the watch ended with 410.
func (w *relistingWatcher) follow(wi watch.Interface, rv int64) (int64, bool) {
	for ev := range wi.ResultChan() {
		if ev.Type == watch.Error {
			if status := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(status) || apierrors.IsGone(status) {
				w.gone()
				return rv, true
			}
			return rv, false
		}
		nc, ok := ev.Object.(*v1alpha1.NodeCapacity)
		if !ok {
			continue
		}
		next, _ := strconv.ParseInt(nc.ResourceVersion, 10, 64)
		w.mu.Lock()
		if next <= rv && ev.Type != watch.Bookmark {
			w.errs = append(w.errs, fmt.Sprintf("%s %s at %d after %d", ev.Type, nc.Name, next, rv))
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			w.items[nc.Name] = nc.ResourceVersion
		case watch.Deleted:
			delete(w.items, nc.Name)
		}
		w.mu.Unlock()
		rv = max(rv, next)
	}
	return rv, false
}

func (w *relistingWatcher) gone() {
	w.mu.Lock()
	w.relists++
	w.mu.Unlock()
}

func (w *relistingWatcher) has(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.items[name]
	return ok
}

func (w *relistingWatcher) snapshot() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.items)
}

func (w *relistingWatcher) relistCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.relists
}

func (w *relistingWatcher) problems() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.errs)
}
