package integration

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/clustercapacity"
	"github.com/example/platform-apiserver/test/framework"
)

// TestClusterCapacityCommittedQuota: quotas in three namespaces of a member
// — two in one namespace, one scoped — and the member's ClusterCapacity
// shows what they commit: at every resourceVersion a watcher of
// ClusterCapacities and ClusterNamespaces sees, its committed sums equal
// the rule (clustercapacity.MemberCommitment) over the ClusterNamespaces'
// quotas seen so far; an edit of one quota's hard on the member moves them
// in one ClusterCapacity event; kubectl get cc -o wide shows them.
func TestClusterCapacityCommittedQuota(t *testing.T) {
	t.Parallel()
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		StartControllerManager:  true,
		StartQuotaController:    true, // fills the quotas' status, as in a real cluster
		ExtraPlatformArgs:       []string{"--cluster-id=local", "--kubeconfig=kubeconfig", "--discovery-batch-delay=50ms"},
	})
	ctx := t.Context()
	api := e.platform.PlatformV1alpha1()
	createNode(t, e.kube, "quota-1")
	eventually(t, "the member's ClusterCapacity with its node", mirrorTimeout, func(ctx context.Context) (bool, string) {
		c, err := api.ClusterCapacities().Get(ctx, "local", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return c.Status.Nodes.Schedulable == 1, fmt.Sprintf("%+v", c.Status.Nodes)
	})
	rec := e.recordQuotas(t)

	q := resource.MustParse
	quota := func(ns, name string, hard corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) {
		create(t, e.kube.CoreV1().ResourceQuotas(ns).Create, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes}})
	}
	for _, ns := range []string{"quota-a", "quota-b", "quota-c"} {
		create(t, e.kube.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	// quota-a: two quotas; requests.cpu is bound by the lesser
	quota("quota-a", "compute", corev1.ResourceList{"requests.cpu": q("4"), "requests.memory": q("4Gi"), "pods": q("10")})
	quota("quota-a", "tight", corev1.ResourceList{"requests.cpu": q("2")})
	// quota-b: scoped only, counted apart
	quota("quota-b", "not-best-effort", corev1.ResourceList{"requests.cpu": q("3"), "pods": q("5")}, corev1.ResourceQuotaScopeNotBestEffort)
	// quota-c: one quota, bare names
	quota("quota-c", "c", corev1.ResourceList{"cpu": q("1500m"), "memory": q("1Gi")})

	committed := func(want func(c *v1alpha1.QuotaCommitment) bool) func(ctx context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			c, err := api.ClusterCapacities().Get(ctx, "local", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return c.Status.Committed != nil && want(c.Status.Committed), fmt.Sprintf("%+v", c.Status.Committed)
		}
	}
	amount := func(m map[string]resource.Quantity, name string) string {
		v, ok := m[name]
		if !ok {
			return "-"
		}
		return v.String()
	}
	eventually(t, "the quotas committed", mirrorTimeout, committed(func(c *v1alpha1.QuotaCommitment) bool {
		// quota-a's least cpu (2) and quota-c's 1500m; memory 4Gi + 1Gi; quota-b apart
		return amount(c.Hard, "requests.cpu") == "3500m" && amount(c.Hard, "requests.memory") == "5Gi" && amount(c.Hard, "pods") == "10" &&
			amount(c.ScopedHard, "requests.cpu") == "3" && amount(c.ScopedHard, "pods") == "5"
	}))
	// A pod in quota-a: its requests show as used (quota admission and the
	// quota controller record them in the quotas' status).
	create(t, e.kube.CoreV1().Pods("quota-a").Create, testPod("quota-a", "p1", "quota-1", "500m", "256Mi"))
	usedCommitted := committed(func(c *v1alpha1.QuotaCommitment) bool {
		return amount(c.Used, "requests.cpu") == "500m" && amount(c.Used, "requests.memory") == "256Mi" && amount(c.Used, "pods") == "1"
	})
	eventually(t, "the pod's requests used", mirrorTimeout, func(ctx context.Context) (bool, string) {
		ok, seen := usedCommitted(ctx)
		if !ok {
			member, _, _ := e.cp.Kubectl(ctx, "get", "resourcequota", "-n", "quota-a", "-o", "yaml")
			mirror, _, _ := e.cp.Kubectl(ctx, "get", "clusternamespace", "local", "-n", "quota-a", "-o", "yaml")
			seen += "\nthe member's quotas:\n" + member + "\ntheir mirror:\n" + mirror
		}
		return ok, seen
	})
	rec.check(t, e, 3)

	// One quota's hard edited on the member: the sum moves in one event.
	before := rec.checkedThrough(t, e)
	tight, err := e.kube.CoreV1().ResourceQuotas("quota-a").Get(ctx, "tight", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tight.Spec.Hard["requests.cpu"] = q("1")
	if _, err := e.kube.CoreV1().ResourceQuotas("quota-a").Update(ctx, tight, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edit committed", mirrorTimeout, committed(func(c *v1alpha1.QuotaCommitment) bool {
		return amount(c.Hard, "requests.cpu") == "2500m"
	}))
	rec.check(t, e, 4)
	var moves []string
	last := ""
	rec.replay(rec.snapshot(), func(at int64, cc *v1alpha1.ClusterCapacity, _ []v1alpha1.ClusterNamespace) {
		if cc.Name != "local" {
			return
		}
		cpu := "-"
		if c := cc.Status.Committed; c != nil {
			cpu = amount(c.Hard, "requests.cpu")
		}
		if at > before && cpu != last {
			moves = append(moves, fmt.Sprintf("at %d: %s to %s", at, last, cpu))
		}
		last = cpu
	})
	if want := []string{"3500m to 2500m"}; len(moves) != 1 || !regexp.MustCompile(`^at \d+: 3500m to 2500m$`).MatchString(moves[0]) {
		t.Errorf("requests.cpu committed moved %q after the edit, want once, %q", moves, want)
	}

	out := e.kubectl(t, "get", "cc", "-o", "wide")
	if got := cell(t, out, "local", "CPU COMMITTED"); !regexp.MustCompile(`^2\.5/3\.9 \(63%\)$`).MatchString(got) {
		t.Errorf("kubectl get cc -o wide: CPU COMMITTED %q, want 2.5/3.9 (63%%): 2.5 cores over the node's 3920m\n%s", got, out)
	}
	if got := cell(t, out, "local", "MEM COMMITTED"); got != "5Gi/7Gi (71%)" {
		t.Errorf("kubectl get cc -o wide: MEM COMMITTED %q, want 5Gi/7Gi (71%%)\n%s", got, out)
	}
	yaml := e.kubectl(t, "get", "clusternamespace", "local", "-n", "quota-b", "-o", "jsonpath={.status.quotas[0].scopes}")
	if yaml != `["NotBestEffort"]` {
		t.Errorf("quota-b's quota scopes %s, want [\"NotBestEffort\"]", yaml)
	}
}

// quotaRecorder holds ClusterNamespaces and ClusterCapacities at one
// resourceVersion and every event of a watch of each from it.
type quotaRecorder struct {
	start  int64
	nss    []v1alpha1.ClusterNamespace
	ccs    []v1alpha1.ClusterCapacity
	mu     sync.Mutex
	events []watch.Event
	errs   []error
}

// recordQuotas lists both kinds until the lists come from one registry
// version, then watches both from it.
func (e *env) recordQuotas(t *testing.T) *quotaRecorder {
	t.Helper()
	api := e.platform.PlatformV1alpha1()
	rec := &quotaRecorder{}
	eventually(t, "lists of both kinds at one resourceVersion", mirrorTimeout, func(ctx context.Context) (bool, string) {
		nss, err := api.ClusterNamespaces("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ccs, err := api.ClusterCapacities().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		rec.nss, rec.ccs = nss.Items, ccs.Items
		if rec.start, err = registry.ParseResourceVersion(nss.ResourceVersion); err != nil {
			return false, err.Error()
		}
		return nss.ResourceVersion == ccs.ResourceVersion, nss.ResourceVersion + " " + ccs.ResourceVersion
	})
	from := metav1.ListOptions{ResourceVersion: fmt.Sprint(rec.start)}
	nw, err := api.ClusterNamespaces("").Watch(t.Context(), from)
	if err != nil {
		t.Fatal(err)
	}
	cw, err := api.ClusterCapacities().Watch(t.Context(), from)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []watch.Interface{nw, cw} {
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				rec.mu.Lock()
				if ev.Type == watch.Error {
					rec.errs = append(rec.errs, apierrors.FromObject(ev.Object))
				} else {
					rec.events = append(rec.events, ev)
				}
				rec.mu.Unlock()
			}
		}()
	}
	return rec
}

func (rec *quotaRecorder) snapshot() []watch.Event {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.events)
}

// checkedThrough waits until the watches caught up with lists of both
// kinds and returns the version they reached.
func (rec *quotaRecorder) checkedThrough(t *testing.T, e *env) int64 {
	t.Helper()
	api := e.platform.PlatformV1alpha1()
	var through int64
	eventually(t, "the watches caught up with the lists", mirrorTimeout, func(ctx context.Context) (bool, string) {
		nss, err := api.ClusterNamespaces("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ccs, err := api.ClusterCapacities().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		rec.mu.Lock()
		errs := rec.errs
		rec.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("watch errors: %v", errs)
		}
		n, c := rec.replay(rec.snapshot(), nil)
		through, _ = registry.ParseResourceVersion(ccs.ResourceVersion)
		same := len(n) == len(nss.Items) // keyed by namespace/name: every ClusterNamespace is named for its member
		for _, ns := range nss.Items {
			r, ok := n[ns.Namespace+"/"+ns.Name]
			same = same && ok && r.ResourceVersion == ns.ResourceVersion
		}
		return same && sameVersions(c, ccs.Items),
			fmt.Sprintf("replayed %d namespaces and %d capacities, listed %d and %d", len(n), len(c), len(nss.Items), len(ccs.Items))
	})
	return through
}

// check waits for the watches to catch up, then replays the events in
// resourceVersion order: at every ClusterCapacity version (and at the
// lists'), the committed quota equals the rule over the member's
// ClusterNamespaces' quotas then.
func (rec *quotaRecorder) check(t *testing.T, e *env, atLeast int) {
	t.Helper()
	rec.checkedThrough(t, e)
	checked := 0
	verify := func(at int64, cc *v1alpha1.ClusterCapacity, nss []v1alpha1.ClusterNamespace) {
		checked++
		var quotas [][]clustercapacity.Quota
		for _, ns := range nss {
			if ns.Status.Cluster != cc.Name {
				continue
			}
			var qs []clustercapacity.Quota
			for _, q := range ns.Status.Quotas {
				qs = append(qs, clustercapacity.Quota{Name: q.Name, Hard: q.Hard, Used: q.Used, Scoped: len(q.Scopes) > 0})
			}
			quotas = append(quotas, qs)
		}
		want := clustercapacity.MemberCommitment(quotas)
		var got clustercapacity.Commitment
		if c := cc.Status.Committed; c != nil {
			got = clustercapacity.Commitment{Hard: c.Hard, Used: c.Used, ScopedHard: c.ScopedHard, ScopedUsed: c.ScopedUsed}
		}
		if !got.Equal(want) {
			t.Errorf("at resourceVersion %d, ClusterCapacity %s committed\n%+v\nthe rule over its ClusterNamespaces' quotas then\n%+v", at, cc.Name, got, want)
		}
	}
	for i := range rec.ccs {
		verify(rec.start, &rec.ccs[i], rec.nss)
	}
	rec.replay(rec.snapshot(), verify)
	if checked < atLeast {
		t.Errorf("checked the committed quota at %d ClusterCapacity versions, want at least %d", checked, atLeast)
	}
	t.Logf("the committed quota equals the rule over the ClusterNamespaces at each of %d ClusterCapacity versions", checked)
}

// replay applies the lists and then the events in resourceVersion order,
// calling at (when set) with the namespaces at each ClusterCapacity event.
func (rec *quotaRecorder) replay(events []watch.Event, at func(int64, *v1alpha1.ClusterCapacity, []v1alpha1.ClusterNamespace)) (map[string]*v1alpha1.ClusterNamespace, map[string]*v1alpha1.ClusterCapacity) {
	nss := map[string]*v1alpha1.ClusterNamespace{}
	for i := range rec.nss {
		nss[rec.nss[i].Namespace+"/"+rec.nss[i].Name] = &rec.nss[i]
	}
	ccs := map[string]*v1alpha1.ClusterCapacity{}
	for i := range rec.ccs {
		ccs[rec.ccs[i].Name] = &rec.ccs[i]
	}
	type versioned struct {
		rv int64
		ev watch.Event
	}
	var ordered []versioned
	for _, ev := range events {
		if ev.Type == watch.Bookmark {
			continue
		}
		obj := ev.Object
		if co, ok := obj.(runtime.CacheableObject); ok {
			obj = co.GetObject()
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			continue
		}
		v, _ := registry.ParseResourceVersion(m.GetResourceVersion())
		ordered = append(ordered, versioned{v, watch.Event{Type: ev.Type, Object: obj}})
	}
	slices.SortStableFunc(ordered, func(a, b versioned) int {
		switch {
		case a.rv < b.rv:
			return -1
		case a.rv > b.rv:
			return 1
		}
		return 0
	})
	for _, v := range ordered {
		switch o := v.ev.Object.(type) {
		case *v1alpha1.ClusterNamespace:
			if v.ev.Type == watch.Deleted {
				delete(nss, o.Namespace+"/"+o.Name)
			} else {
				nss[o.Namespace+"/"+o.Name] = o
			}
		case *v1alpha1.ClusterCapacity:
			if v.ev.Type == watch.Deleted {
				delete(ccs, o.Name)
				continue
			}
			ccs[o.Name] = o
			if at != nil {
				var list []v1alpha1.ClusterNamespace
				for _, n := range nss {
					list = append(list, *n)
				}
				at(v.rv, o, list)
			}
		}
	}
	return nss, ccs
}
