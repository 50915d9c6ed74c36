package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/test/framework"
)

// mirrorTimeout bounds how long a member change may take to show up.
const mirrorTimeout = 60 * time.Second

// TestDiscovery runs discovery against the framework's own kube-apiserver as
// the member cluster "local", and checks the mirror through the aggregator.
// The subtests build on each other and run in order.
func TestDiscovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		StartControllerManager:  true, // namespace deletion
		ExtraPlatformArgs: []string{
			"--cluster-id=local",
			// The framework runs the server in its work directory, where it
			// writes the admin kubeconfig before the server starts.
			"--kubeconfig=kubeconfig",
			"--discovery-batch-delay=50ms",
			// A restarted server waits out its predecessor's lease.
			"--leader-elect-lease-duration=3s",
			"--leader-elect-renew-deadline=2s",
			"--leader-elect-retry-period=500ms",
		},
	})
	t.Run("namespaces", e.testDiscoveryNamespaces)
	t.Run("nodes and pods", e.testDiscoveryNodesAndPods)
	t.Run("quotas", e.testDiscoveryQuotas)
	t.Run("a NUL in a node condition", e.testDiscoveryNUL)
	t.Run("resume after SIGKILL", e.testDiscoveryResume)
	t.Run("relist after 410", e.testDiscoveryExpired)
}

func (e *env) testDiscoveryNamespaces(t *testing.T) {
	e.kubectl(t, "create", "namespace", "smoke-test")
	hasSmokeTest := func(ctx context.Context) (bool, string) {
		out, _, err := e.cp.Kubectl(ctx, "get", "clusternamespaces", "-A")
		if err != nil {
			return false, err.Error()
		}
		for line := range strings.SplitSeq(out, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "smoke-test" && f[1] == "local" && f[2] == "Active" {
				return true, out
			}
		}
		return false, out
	}
	eventually(t, "smoke-test in kubectl get clusternamespaces -A", mirrorTimeout, hasSmokeTest)

	e.kubectl(t, "label", "namespace", "smoke-test", "team=payments")
	eventually(t, "label on the mirror", mirrorTimeout, func(ctx context.Context) (bool, string) {
		got := e.jsonpath(ctx, "{.metadata.labels.team}", "get", "clusternamespace", "local", "-n", "smoke-test")
		return got == "payments", got
	})

	e.kubectl(t, "delete", "namespace", "smoke-test", "--wait=false")
	eventually(t, "smoke-test gone from the mirror", 2*mirrorTimeout, func(ctx context.Context) (bool, string) {
		present, out := hasSmokeTest(ctx)
		if strings.HasPrefix(out, "error") {
			return false, out
		}
		gone := !present && !strings.Contains(out, "smoke-test")
		return gone, out
	})
}

func (e *env) testDiscoveryNodesAndPods(t *testing.T) {
	ctx := t.Context()
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, testNode("node-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	field := func(path string) func(ctx context.Context) string {
		return func(ctx context.Context) string {
			return e.jsonpath(ctx, path, "get", "nodecapacity", "local.node-a")
		}
	}
	expect := func(what string, get func(context.Context) string, want string) {
		t.Helper()
		eventually(t, what, mirrorTimeout, func(ctx context.Context) (bool, string) {
			got := get(ctx)
			return got == want, fmt.Sprintf("got %q, want %q", got, want)
		})
	}
	// Admission taints a new node not-ready until the node lifecycle
	// controller (not running here) sees it Ready: a NoSchedule taint.
	expect("new node tainted, not schedulable", field("{.status.schedulable}/{.status.taints[0].key}"), "false/node.kubernetes.io/not-ready")
	e.untaint(t, "node-a")
	expect("untainted node schedulable", field("{.status.schedulable}"), "true")
	expect("allocatable CPU", field("{.status.allocatable.cpu}"), "3920m")

	e.kubectl(t, "cordon", "node-a")
	expect("cordoned node not schedulable", field("{.status.schedulable}/{.status.unschedulable}"), "false/true")
	e.kubectl(t, "uncordon", "node-a")
	expect("uncordoned node schedulable", field("{.status.schedulable}"), "true")

	e.kubectl(t, "create", "namespace", "apps")
	for _, p := range []*corev1.Pod{
		testPod("apps", "web", "node-a", "250m", "256Mi", "100m", "128Mi"),
		testPod("apps", "batch", "node-a", "500m", "1Gi"),
		testPod("apps", "pending", "", "1", "2Gi"),
	} {
		if _, err := e.kube.CoreV1().Pods("apps").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expect("node requests summed", field("{.status.requested.cpu}/{.status.requested.memory}/{.status.requested.pods}"), "850m/1408Mi/2")
	nsField := func(ctx context.Context) string {
		return e.jsonpath(ctx, "{.status.podCount}/{.status.requests.cpu}", "get", "clusternamespace", "local", "-n", "apps")
	}
	expect("namespace requests include the unscheduled pod", nsField, "3/1850m")

	// A pod that finishes no longer holds its requests.
	batch, err := e.kube.CoreV1().Pods("apps").Get(ctx, "batch", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	batch.Status.Phase = corev1.PodSucceeded
	if _, err := e.kube.CoreV1().Pods("apps").UpdateStatus(ctx, batch, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("succeeded pod released", field("{.status.requested.cpu}/{.status.requested.pods}"), "350m/1")
	e.kubectl(t, "delete", "pod", "-n", "apps", "web", "--wait=false", "--grace-period=0", "--force")
	expect("deleted pod released", field("{.status.requested.cpu}/{.status.requested.pods}"), "0/0")
	expect("namespace counts follow", nsField, "1/1")
}

func (e *env) testDiscoveryQuotas(t *testing.T) {
	ctx := t.Context()
	// A namespace of its own: without the quota controller the quota has no
	// status, and quota admission would reject pods next to it.
	e.kubectl(t, "create", "namespace", "quota-ns")
	rq := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "quota-ns", Name: "compute"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceRequestsCPU: resource.MustParse("4"), corev1.ResourceRequestsMemory: resource.MustParse("8Gi"),
		}},
	}
	if _, err := e.kube.CoreV1().ResourceQuotas("quota-ns").Create(ctx, rq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "quota on the mirror", mirrorTimeout, func(ctx context.Context) (bool, string) {
		got := e.jsonpath(ctx, `{.status.quotas[0].name}/{.status.quotas[0].hard.requests\.cpu}`, "get", "clusternamespace", "local", "-n", "quota-ns")
		return got == "compute/4", got
	})
	if err := e.kube.CoreV1().ResourceQuotas("quota-ns").Delete(ctx, "compute", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleted quota gone", mirrorTimeout, func(ctx context.Context) (bool, string) {
		got := e.jsonpath(ctx, `{.status.quotas}`, "get", "clusternamespace", "local", "-n", "quota-ns")
		return got == "", got
	})
}

// churn creates and relabels namespaces until stop is closed.
func (e *env) churn(ctx context.Context, prefix string, stop <-chan struct{}, created chan<- int) error {
	defer close(created)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Labels: map[string]string{"round": "1"}}}
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
		if i > 0 {
			prev := `{"metadata":{"labels":{"round":"2"}}}`
			if _, err := e.kube.CoreV1().Namespaces().Patch(ctx, fmt.Sprintf("%s-%d", prefix, i-1), "application/merge-patch+json", []byte(prev), metav1.PatchOptions{}); err != nil {
				return err
			}
		}
		select {
		case created <- i:
		default:
		}
	}
}

func (e *env) testDiscoveryResume(t *testing.T) {
	ctx := t.Context()
	stop, created := make(chan struct{}), make(chan int, 1)
	var wg sync.WaitGroup
	var churnErr error
	wg.Go(func() { churnErr = e.churn(ctx, "churn", stop, created) })
	for i := range created {
		if i >= 20 {
			break
		}
	}
	if err := e.cp.KillPlatformAPIServer(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for range created { // keep churning while it is down
		if n++; n >= 10 {
			break
		}
	}
	close(stop)
	wg.Wait()
	if churnErr != nil {
		t.Fatalf("churn: %v", churnErr)
	}

	// Changes while the server is down.
	e.kubectl(t, "create", "namespace", "while-down")
	e.kubectl(t, "delete", "namespace", "churn-1", "--wait=false")
	e.kubectl(t, "label", "namespace", "churn-2", "round=3", "--overwrite")
	if _, err := e.kube.CoreV1().Pods("apps").Create(ctx, testPod("apps", "late", "node-a", "300m", "64Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.kubectl(t, "delete", "pod", "-n", "apps", "pending", "--wait=false", "--grace-period=0", "--force")

	if err := e.cp.StartPlatformAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "registry equals the member cluster", 2*mirrorTimeout, func(ctx context.Context) (bool, string) {
		diff := e.mirrorDiff(ctx, "local")
		return diff == "", diff
	})
	relisted, err := e.platformMetric(ctx, "platform_discovery_relists_total", `cluster="local"`)
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := e.platformMetric(ctx, "platform_discovery_resumes_total", `cluster="local"`)
	if err != nil {
		t.Fatal(err)
	}
	if relisted != 0 || resumed != 6 {
		t.Errorf("after the restart: %v relists and %v resumes, want 0 relists and 6 resumes (from the persisted cursors)", relisted, resumed)
	}
}

func (e *env) testDiscoveryExpired(t *testing.T) {
	ctx := t.Context()
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, testNode("node-b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-b mirrored", mirrorTimeout, func(ctx context.Context) (bool, string) {
		diff := e.mirrorDiff(ctx, "local")
		return diff == "", diff
	})
	e.untaint(t, "node-b")
	if err := e.cp.KillPlatformAPIServer(); err != nil {
		t.Fatal(err)
	}

	// Changes the server can only learn about by relisting: deletions above all.
	e.kubectl(t, "create", "namespace", "after-expiry")
	e.kubectl(t, "delete", "namespace", "churn-3", "--wait=false")
	e.kubectl(t, "delete", "node", "node-b")
	e.kubectl(t, "delete", "pod", "-n", "apps", "late", "--wait=false", "--grace-period=0", "--force")
	if err := e.kube.CoreV1().Namespaces().Delete(ctx, "while-down", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	// kube-controller-manager's namespace controller cannot finish a
	// deletion while an aggregated API is down (its discovery of
	// platform.example.io fails), so the test clears the namespaces'
	// finalizer itself, as an operator would.
	eventually(t, "deleted namespaces finalized", mirrorTimeout, func(ctx context.Context) (bool, string) {
		var errs []error
		for _, name := range []string{"churn-3", "while-down"} {
			ns, err := e.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if err == nil && ns.DeletionTimestamp != nil && len(ns.Spec.Finalizers) > 0 {
				ns.Spec.Finalizers = nil
				if _, err = e.kube.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err == nil {
					// A terminating namespace without finalizers goes at its next delete.
					err = e.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
				}
			}
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("namespace %s: %w", name, err))
			}
		}
		return len(errs) == 0, fmt.Sprint(errs)
	})
	// Compact etcd past every cursor, and restart kube-apiserver so its
	// watch cache cannot serve the old resourceVersions either.
	rev, err := compactEtcd(ctx, e.cp.EtcdURL())
	if err != nil {
		t.Fatalf("compact etcd: %v", err)
	}
	t.Logf("compacted etcd at revision %d", rev)
	if err := e.cp.RestartKubeAPIServer(ctx); err != nil {
		t.Fatal(err)
	}

	if err := e.cp.StartPlatformAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "registry equals the member cluster after the relist", 2*mirrorTimeout, func(ctx context.Context) (bool, string) {
		diff := e.mirrorDiff(ctx, "local")
		return diff == "", diff
	})
	expiredRelists, err := e.platformMetric(ctx, "platform_discovery_relists_total", `cluster="local"`, `reason="expired"`)
	if err != nil {
		t.Fatal(err)
	}
	if expiredRelists < 1 {
		t.Errorf("relists after 410 = %v, want at least 1", expiredRelists)
	}
	log, err := os.ReadFile(e.cp.PlatformAPIServerLogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "Member cursor expired (410); relisting") {
		t.Errorf("the server log does not say why it relisted")
	}
}

// untaint removes the taints admission put on a new node.
func (e *env) untaint(t *testing.T, node string) {
	t.Helper()
	patch := []byte(`{"spec":{"taints":null}}`)
	if _, err := e.kube.CoreV1().Nodes().Patch(t.Context(), node, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// testDiscoveryNUL: a node whose condition message carries a NUL character
// (which PostgreSQL refuses in text and jsonb) is mirrored with U+FFFD in
// its place, counted as a conversion issue, and the nodes keep mirroring.
func (e *env) testDiscoveryNUL(t *testing.T) {
	ctx := t.Context()
	before, err := e.platformMetric(ctx, "platform_discovery_errors_total", `cluster="local"`, `resource="nodes"`, `reason="conversion"`)
	if err != nil {
		t.Fatal(err)
	}
	n := testNode("nul-node")
	n.Status.Conditions[0].Message = "disk\x00full"
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node mirrored with the NUL replaced", mirrorTimeout, func(ctx context.Context) (bool, string) {
		got := e.jsonpath(ctx, "{.status.conditions[0].message}", "get", "nodecapacity", "local.nul-node")
		return got == "disk\uFFFDfull", fmt.Sprintf("%q", got)
	})
	if v, err := e.platformMetric(ctx, "platform_discovery_errors_total", `cluster="local"`, `resource="nodes"`, `reason="conversion"`); err != nil || v <= before {
		t.Errorf("conversion errors %v → %v (%v); want the NUL counted", before, v, err)
	}
	e.kubectl(t, "label", "node", "nul-node", "after=nul")
	eventually(t, "a later change of the node mirrored", mirrorTimeout, func(ctx context.Context) (bool, string) {
		got := e.jsonpath(ctx, "{.metadata.labels.after}", "get", "nodecapacity", "local.nul-node")
		return got == "nul", got
	})
}
