package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/example/platform-apiserver/test/framework"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestRegistryHungPrimary: the registry's primary stops answering the way a
// paused host does — every one of its processes SIGSTOPped, its sockets
// left open, so no client sees a reset — while discovery mirrors a change
// every second and a watch and an informer are open (docs/faults.md).
//
// First it comes back (SIGCONT): meanwhile readiness fails naming the change
// feed, a list answers with an error well before its request timeout, and afterwards
// everything made meanwhile arrives. Then it hangs again and its streaming
// standby is promoted (the server's multi-host DSN with
// target_session_attrs=read-write reaches it): the watch and the informer
// opened before deliver changes made after the promotion, and the informer
// ends equal to a fresh list.
func TestRegistryHungPrimary(t *testing.T) {
	oneFaultTestAtATime(t)
	primary := pgtest.NewInstance(t, pgtest.Options{})
	standby := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		DatabaseURL:             pgtest.MultiHostDSN("", "read-write", primary, standby.Instance),
		ExtraPlatformArgs:       []string{"--cluster-id=local", "--kubeconfig=kubeconfig", "--discovery-batch-delay=50ms"},
	})
	t.Cleanup(func() { _ = primary.Thaw() }) // before the instance's Stop
	ctx := t.Context()
	eventually(t, "mirror before the faults", mirrorTimeout, func(ctx context.Context) (bool, string) {
		d := e.mirrorDiff(ctx, "local")
		return d == "", d
	})
	informer, _ := monotonicInformer(t, e.platform)
	watcher := startRelistingWatcher(t, e.platform)
	stopWrites := e.createNodesEverySecond(t, "hang")

	// The primary hangs and comes back.
	if err := primary.Freeze(); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	listed := make(chan error, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		_, err := e.platform.PlatformV1alpha1().NodeCapacities().List(lctx, metav1.ListOptions{})
		listed <- err
	}()
	eventually(t, "readiness fails naming the change feed", 30*time.Second, func(ctx context.Context) (bool, string) {
		code, body, err := probePlatform(ctx, e.cp, "/readyz?verbose")
		return err == nil && code != 200 && strings.Contains(body, "[-]registry-feed"), fmt.Sprintf("%d %v\n%s", code, err, body)
	})
	t.Logf("readiness failed %s after the primary hung", time.Since(frozen).Round(100*time.Millisecond))
	select {
	case err := <-listed:
		if err == nil {
			t.Errorf("a list while the only primary hangs succeeded")
		}
		t.Logf("the list answered %s after the primary hung: %v", time.Since(frozen).Round(100*time.Millisecond), err)
	case <-time.After(40*time.Second - time.Since(frozen)):
		// Well before the request timeout (60 s): the change feed's read
		// timeout (10 s) cuts the connections stuck on the hung server.
		t.Errorf("a list was still waiting 40 s after the primary hung")
	}
	if err := primary.Thaw(); err != nil {
		t.Fatal(err)
	}
	thawed := time.Now()
	eventually(t, "readiness after SIGCONT", mirrorTimeout, func(ctx context.Context) (bool, string) {
		code, body, err := probePlatform(ctx, e.cp, "/readyz?verbose")
		return err == nil && code == 200, fmt.Sprintf("%d %v\n%s", code, err, body)
	})
	t.Logf("ready again %s after SIGCONT", time.Since(thawed).Round(100*time.Millisecond))
	e.watchersHoldTheList(t, "after SIGCONT", watcher, informer, false)

	// The primary hangs for good; its standby takes over.
	if err := primary.Freeze(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	after := testNode("after-promotion")
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, after, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the open watch and informer deliver a change made after the promotion", 90*time.Second, func(context.Context) (bool, string) {
		_, inInformer, _ := informer.GetStore().GetByKey("local.after-promotion")
		return watcher.has("local.after-promotion") && inInformer,
			fmt.Sprintf("watcher has it: %v, informer has it: %v", watcher.has("local.after-promotion"), inInformer)
	})
	t.Logf("a change made after the promotion reached the open watch and informer %s after it", time.Since(promoted).Round(100*time.Millisecond))
	stopWrites()
	e.watchersHoldTheList(t, "after the promotion", watcher, informer, true)
}

// createNodesEverySecond creates a node named prefix-N in the member every
// second until the returned function is called.
func (e *env) createNodesEverySecond(t *testing.T, prefix string) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = e.kube.CoreV1().Nodes().Create(ctx, testNode(fmt.Sprintf("%s-%03d", prefix, i)), metav1.CreateOptions{})
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	})
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// watchersHoldTheList waits until the mirror equals the member (when
// mirrored) and the watcher and the informer hold exactly what a list
// returns.
func (e *env) watchersHoldTheList(t *testing.T, when string, w *relistingWatcher, informer cache.SharedIndexInformer, mirrored bool) {
	t.Helper()
	if mirrored {
		eventually(t, "mirror "+when, 2*mirrorTimeout, func(ctx context.Context) (bool, string) {
			d := e.mirrorDiff(ctx, "local")
			return d == "", d
		})
	}
	eventually(t, "watcher and informer hold what a list returns "+when, 2*mirrorTimeout, func(ctx context.Context) (bool, string) {
		want, err := e.listVersions(ctx, "nodecapacities")
		if err != nil {
			return false, err.Error()
		}
		got := informerVersions(informer)
		return maps.Equal(w.snapshot(), want) && maps.Equal(got, want),
			fmt.Sprintf("watcher: %v\ninformer: %v\nlist: %v", w.snapshot(), got, want)
	})
	if errs := w.problems(); len(errs) > 0 {
		t.Errorf("watcher %s: %s", when, strings.Join(errs, "; "))
	}
}

// informerVersions maps each object the informer holds (objectKey) to its
// resourceVersion.
func informerVersions(informer cache.SharedIndexInformer) map[string]string {
	got := map[string]string{}
	for _, obj := range informer.GetStore().List() {
		if m, err := meta.Accessor(obj); err == nil {
			got[objectKey(m)] = m.GetResourceVersion()
		}
	}
	return got
}

// listVersions maps each object of a fresh list of kind (nodecapacities,
// clusternamespaces, clustercapacities; objectKey) to its resourceVersion.
func (e *env) listVersions(ctx context.Context, kind string) (map[string]string, error) {
	var list runtime.Object
	var err error
	switch kind {
	case "nodecapacities":
		list, err = e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{})
	case "clusternamespaces":
		list, err = e.platform.PlatformV1alpha1().ClusterNamespaces("").List(ctx, metav1.ListOptions{})
	case "clustercapacities":
		list, err = e.platform.PlatformV1alpha1().ClusterCapacities().List(ctx, metav1.ListOptions{})
	default:
		return nil, fmt.Errorf("no list of %q", kind)
	}
	if err != nil {
		return nil, err
	}
	versions := map[string]string{}
	err = meta.EachListItem(list, func(obj runtime.Object) error {
		m, err := meta.Accessor(obj)
		if err == nil {
			versions[objectKey(m)] = m.GetResourceVersion()
		}
		return err
	})
	return versions, err
}

// objectKey is an object's name, or namespace/name.
func objectKey(m metav1.Object) string {
	if ns := m.GetNamespace(); ns != "" {
		return ns + "/" + m.GetName()
	}
	return m.GetName()
}
