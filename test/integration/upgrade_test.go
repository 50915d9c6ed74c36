package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/example/platform-apiserver/pkg/generated/informers/externalversions"
	"github.com/example/platform-apiserver/test/framework"
)

// previousRelease is the commit of the release before this one: the last
// one landed before the migrations this release adds (030). Move it to the
// last landed commit whenever a release adds a migration.
const previousRelease = "c7c4f7b1fe986cb5432434f866c4560dce3370b9"

// TestRollingUpgradeSideBySide: the previous release mirrors a member and
// serves informers of every kind; a replica of this release starts beside
// it on the same registry (and port), migrates it while the old one runs
// and changes keep coming (a node created every second), then the old
// replica stops, as a rolling upgrade does. No watcher misses a change:
// each kind's informer, opened on the old release, equals a fresh list at
// the end, and the mirror equals the member (docs/upgrades.md).
func TestRollingUpgradeSideBySide(t *testing.T) {
	oneFaultTestAtATime(t)
	ctx := t.Context()
	old, err := framework.BuildRelease(ctx, previousRelease)
	if errors.Is(err, framework.ErrReleaseNotInHistory) {
		t.Skipf("the previous release cannot be built here: %v; clone with its history to run this test", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	current := os.Getenv("PLATFORM_APISERVER_BINARY")
	if current == "" {
		current = filepath.Join(t.TempDir(), "platform-apiserver")
		if err := framework.BuildPlatformAPIServer(ctx, current); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: old,
		ExtraPlatformArgs: []string{"--cluster-id=local", "--kubeconfig=kubeconfig", "--discovery-batch-delay=50ms", "--permit-port-sharing",
			"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms"},
	})
	eventually(t, "the previous release's mirror", mirrorTimeout, func(ctx context.Context) (bool, string) {
		d := e.mirrorDiff(ctx, "local")
		return d == "", d
	})
	factory := externalversions.NewSharedInformerFactory(e.platform, 0)
	informers := map[string]cache.SharedIndexInformer{
		"nodecapacities":    factory.Platform().V1alpha1().NodeCapacities().Informer(),
		"clusternamespaces": factory.Platform().V1alpha1().ClusterNamespaces().Informer(),
		"clustercapacities": factory.Platform().V1alpha1().ClusterCapacities().Informer(),
	}
	ictx, stopInformers := context.WithCancel(ctx)
	defer stopInformers()
	factory.Start(ictx.Done())
	for kind, inf := range informers {
		if !cache.WaitForCacheSync(ictx.Done(), inf.HasSynced) {
			t.Fatalf("the %s informer never synced", kind)
		}
	}
	// Quotas the previous release mirrors without their scopes (migration
	// 030): this release counts the scoped one apart once it has relisted
	// them (docs/clustercapacity.md, "Committed quota").
	create(t, e.kube.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-quotas"}})
	for _, rq := range []*corev1.ResourceQuota{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "upgrade-quotas", Name: "all"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.memory": resource.MustParse("2Gi")}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "upgrade-quotas", Name: "not-best-effort"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.cpu": resource.MustParse("3")},
				Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}}},
	} {
		create(t, e.kube.CoreV1().ResourceQuotas("upgrade-quotas").Create, rq)
	}
	eventually(t, "the quotas on the previous release's mirror", mirrorTimeout, func(ctx context.Context) (bool, string) {
		got := e.jsonpath(ctx, `{.status.quotas[*].name}`, "get", "clusternamespace", "local", "-n", "upgrade-quotas")
		return got == "all not-best-effort", got
	})
	stopWrites := e.createNodesEverySecond(t, "upgrade")

	replica, err := e.cp.StartPlatformReplicaOf(ctx, "platform-apiserver-new", current)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Stop() })
	// Its readiness is not told apart from the old one's (they share the
	// port): wait for its migrations instead.
	eventually(t, "this release's migrations applied beside the previous release", mirrorTimeout, func(ctx context.Context) (bool, string) {
		states, err := e.store.MigrationStatus(ctx)
		if err != nil {
			return false, err.Error()
		}
		pending := 0
		for _, st := range states {
			if !st.Applied {
				pending++
			}
		}
		return pending == 0, fmt.Sprintf("%d migrations pending", pending)
	})
	t.Log("this release's replica runs beside the previous release's, the registry migrated")
	time.Sleep(5 * time.Second) // both serve and write while changes come
	if err := e.cp.StopPlatformAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Log("the previous release's replica stopped")
	time.Sleep(5 * time.Second) // this release alone, taking the member over
	stopWrites()

	eventually(t, "the mirror after the upgrade", 2*mirrorTimeout, func(ctx context.Context) (bool, string) {
		d := e.mirrorDiff(ctx, "local")
		return d == "", d
	})
	eventually(t, "the committed quota, the scoped quota apart", mirrorTimeout, func(ctx context.Context) (bool, string) {
		cc, err := e.platform.PlatformV1alpha1().ClusterCapacities().Get(ctx, "local", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := cc.Status.Committed
		if c == nil {
			return false, "no committed quota"
		}
		mem, cpu := c.Hard["requests.memory"], c.ScopedHard["requests.cpu"]
		_, unscopedCPU := c.Hard["requests.cpu"]
		return mem.String() == "2Gi" && cpu.String() == "3" && !unscopedCPU, fmt.Sprintf("%+v", c)
	})
	eventually(t, "every informer equal to a fresh list", mirrorTimeout, func(ctx context.Context) (bool, string) {
		var diffs []string
		for kind, inf := range informers {
			if d := informerVsList(ctx, e, kind, inf); d != "" {
				diffs = append(diffs, kind+": "+d)
			}
		}
		return len(diffs) == 0, strings.Join(diffs, "\n")
	})
}

// informerVsList compares an informer's objects (name and resourceVersion)
// with a fresh list of the kind; "" when equal.
func informerVsList(ctx context.Context, e *env, kind string, inf cache.SharedIndexInformer) string {
	listed, err := e.listVersions(ctx, kind)
	if err != nil {
		return err.Error()
	}
	held := informerVersions(inf)
	var diffs []string
	for k, rv := range listed {
		if held[k] != rv {
			diffs = append(diffs, fmt.Sprintf("%s listed at %s, informer holds %q", k, rv, held[k]))
		}
	}
	for k := range held {
		if _, ok := listed[k]; !ok {
			diffs = append(diffs, k+" held by the informer, not listed")
		}
	}
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return strings.Join(diffs, "; ")
}
