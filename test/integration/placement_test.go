package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/test/framework"
)

// placementShape is one pod shape: the PlacementReport spec and the pod
// kube-scheduler places, built from the same values.
type placementShape struct {
	name     string
	requests map[string]string
	selector map[string]string
	affinity []v1alpha1.NodeSelectorTerm
	tolerate []v1alpha1.Toleration
	spread   *v1alpha1.TopologySpread
}

func (s placementShape) spec(clusters ...string) v1alpha1.PlacementReportSpec {
	spec := v1alpha1.PlacementReportSpec{Requests: map[string]resource.Quantity{}, NodeSelector: s.selector,
		NodeAffinity: s.affinity, Tolerations: s.tolerate, TopologySpread: s.spread, Clusters: clusters}
	for r, v := range s.requests {
		spec.Requests[r] = resource.MustParse(v)
	}
	return spec
}

func (s placementShape) pod(ns string, i int) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", s.name, i), Labels: map[string]string{"shape": s.name}},
		Spec: corev1.PodSpec{NodeSelector: s.selector, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}}}
	for r, v := range s.requests {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceName(r)] = resource.MustParse(v)
		if r != "cpu" && r != "memory" { // extended resources: limits equal requests
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceName(r): resource.MustParse(v)}
		}
	}
	for _, t := range s.affinity {
		term := corev1.NodeSelectorTerm{}
		for _, e := range t.MatchExpressions {
			term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: e.Key, Operator: corev1.NodeSelectorOperator(e.Operator), Values: e.Values})
		}
		for _, f := range t.MatchFields {
			term.MatchFields = append(term.MatchFields, corev1.NodeSelectorRequirement{Key: f.Key, Operator: corev1.NodeSelectorOperator(f.Operator), Values: f.Values})
		}
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
		}
		ns := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, term)
	}
	for _, t := range s.tolerate {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	if s.spread != nil {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: s.spread.MaxSkew, TopologyKey: s.spread.TopologyKey,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"shape": s.name}}}}
	}
	return p
}

// TestPlacementReport is the golden test against kube-scheduler v1.37.2:
// on kwok nodes of mixed sizes, taints, cordons and labels, for each pod
// shape the report's fits for the member equals how many pods of the shape
// the real scheduler binds when the test creates more than fit. Then the
// same nodes mirrored as a second member that becomes unreachable: its
// answer is flagged stale with its age; and a tenant allowed one member
// gets 403 for the other.
func TestPlacementReport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		StartSimulator:          true,
		StartControllerManager:  true, // lifts the not-ready taint, taints cordoned nodes as in a real cluster
		StartScheduler:          true,
		ExtraPlatformArgs: []string{"--cluster-id=local", "--kubeconfig=kubeconfig", "--discovery-batch-delay=50ms",
			"--member-kubeconfig-dir=" + dir, "--member-kubeconfig-dir-interval=300ms"},
	})
	ctx := t.Context()
	gpu := "nvidia.com/gpu"
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
		for i := 0; i+1 < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	zone := func(z, pool string) map[string]string {
		return map[string]string{"topology.kubernetes.io/zone": z, "pool": pool}
	}
	gpuTaint := []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	nodes := []framework.SimulatedNode{
		{Name: "small-a1", Capacity: rl("cpu", "2", "memory", "4Gi"), Labels: zone("a", "general")},
		{Name: "small-a2", Capacity: rl("cpu", "2", "memory", "4Gi"), Labels: zone("a", "general")},
		{Name: "big-b1", Capacity: rl("cpu", "8", "memory", "32Gi"), Labels: zone("b", "general")},
		{Name: "mem-b2", Capacity: rl("cpu", "2", "memory", "64Gi"), Labels: zone("b", "memory")},
		{Name: "gpu-c1", Capacity: rl("cpu", "4", "memory", "16Gi", gpu, "4"), Labels: zone("c", "gpu"), Taints: gpuTaint},
		{Name: "gpu-c2", Capacity: rl("cpu", "4", "memory", "16Gi", gpu, "2"), Labels: zone("c", "gpu"), Taints: gpuTaint},
		{Name: "cordoned-a3", Capacity: rl("cpu", "4", "memory", "8Gi"), Labels: zone("a", "general"), Unschedulable: true},
		{Name: "db-a4", Capacity: rl("cpu", "4", "memory", "16Gi"), Labels: zone("a", "db"),
			Taints: []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}}},
		{Name: "edge-b3", Capacity: rl("cpu", "2", "memory", "2Gi", "pods", "3"), Labels: zone("b", "edge")},
	}
	for _, n := range nodes {
		if _, err := e.cp.CreateSimulatedNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	e.kubectl(t, "create", "namespace", "placed")
	// Pods already bound: the room they take counts for both.
	existing := map[string][2]string{"big-b1": {"3", "8Gi"}, "small-a2": {"500m", "1Gi"}, "edge-b3": {"100m", "128Mi"}, "gpu-c1": {"1", "1Gi"}}
	for node, req := range existing {
		create(t, e.kube.CoreV1().Pods("placed").Create, testPod("placed", "existing-"+node, node, req[0], req[1]))
	}
	taken := testPod("placed", "existing-gpu", "gpu-c1", "100m", "128Mi")
	request(&taken.Spec.Containers[0], gpu, "1")
	taken.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceName(gpu): resource.MustParse("1")}
	create(t, e.kube.CoreV1().Pods("placed").Create, taken)

	// The second member is the same cluster through a forwarder the test
	// can take away.
	fwd := e.forwardedMember(t, dir, "east")
	eventually(t, "both members mirror the nodes and their pods", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out := e.jsonpath(ctx, `{range .items[*]}{.metadata.name}={.status.requested.pods} {end}`, "get", "nodecapacities")
		for _, m := range []string{"local", "east"} {
			for _, n := range nodes {
				want := map[string]string{"big-b1": "1", "small-a2": "1", "edge-b3": "1", "gpu-c1": "2"}[n.Name]
				if want == "" {
					want = "0"
				}
				if !strings.Contains(out, m+"."+n.Name+"="+want+" ") {
					return false, out
				}
			}
		}
		return true, out
	})
	eventually(t, "cordoned-a3 tainted by the node lifecycle controller", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out := e.jsonpath(ctx, `{.status.taints[*].key}`, "get", "nodecapacity", "local.cordoned-a3")
		return strings.Contains(out, "node.kubernetes.io/unschedulable"), out
	})

	shapes := []placementShape{
		{name: "cpu-heavy", requests: map[string]string{"cpu": "1500m", "memory": "256Mi"}},
		{name: "memory-heavy", requests: map[string]string{"cpu": "100m", "memory": "6Gi"}},
		{name: "gpu", requests: map[string]string{"cpu": "500m", "memory": "1Gi", gpu: "1"},
			tolerate: []v1alpha1.Toleration{{Key: "gpu", Operator: "Equal", Value: "true", Effect: "NoSchedule"}}},
		{name: "gpu-untolerated", requests: map[string]string{"cpu": "500m", gpu: "1"}},
		{name: "selector", requests: map[string]string{"cpu": "1", "memory": "1Gi"}, selector: map[string]string{"pool": "general"}},
		{name: "affinity", requests: map[string]string{"cpu": "500m", "memory": "512Mi"}, affinity: []v1alpha1.NodeSelectorTerm{
			{MatchExpressions: []v1alpha1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: "In", Values: []string{"a", "b"}},
				{Key: "pool", Operator: "NotIn", Values: []string{"memory", "general"}}}},
			{MatchFields: []v1alpha1.NodeSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{"small-a1"}}}}}},
		{name: "tolerate-all", requests: map[string]string{"cpu": "2", "memory": "1Gi"}, tolerate: []v1alpha1.Toleration{{Operator: "Exists"}}},
		{name: "zone-spread", requests: map[string]string{"cpu": "500m", "memory": "256Mi"},
			spread: &v1alpha1.TopologySpread{TopologyKey: "topology.kubernetes.io/zone", MaxSkew: 1}},
		{name: "hostname-spread", requests: map[string]string{"cpu": "250m", "memory": "128Mi"}, selector: map[string]string{"pool": "general"},
			spread: &v1alpha1.TopologySpread{TopologyKey: "kubernetes.io/hostname", MaxSkew: 2}},
		{name: "pod-count", requests: map[string]string{"cpu": "10m"}, selector: map[string]string{"pool": "edge"}},
		{name: "memory-zone-spread", requests: map[string]string{"cpu": "100m", "memory": "3Gi"},
			tolerate: []v1alpha1.Toleration{{Key: "gpu", Operator: "Exists"}},
			spread:   &v1alpha1.TopologySpread{TopologyKey: "topology.kubernetes.io/zone", MaxSkew: 2}},
	}
	// Every report first, on the mirrored state; then each shape against
	// the scheduler, its pods deleted before the next (the scheduler sees
	// the deletions before the next shape's pods, in watch order).
	answers := map[string]*v1alpha1.PlacementReport{}
	for _, s := range shapes {
		r, err := e.platform.PlatformV1alpha1().PlacementReports().Create(ctx, &v1alpha1.PlacementReport{Spec: s.spec("local", "east")}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		answers[s.name] = r
	}
	for _, s := range shapes {
		r := answers[s.name]
		if len(r.Status.Clusters) != 2 || r.Status.Clusters[0].Fits != r.Status.Clusters[1].Fits || r.Status.Fits != 2*r.Status.Clusters[0].Fits {
			t.Errorf("%s: the two members mirror the same nodes but answer %+v", s.name, r.Status)
			continue
		}
		fits := r.Status.Clusters[0].Fits
		bound := e.schedule(t, s, int(fits)+3)
		t.Logf("%s: report fits %d on %d nodes; kube-scheduler bound %d", s.name, fits, ptr.Deref(r.Status.Clusters[0].Nodes, -1), bound)
		if int64(bound) != fits {
			t.Errorf("%s: the report says %d replicas fit, kube-scheduler bound %d of %d", s.name, fits, bound, fits+3)
		}
	}

	// kubectl create -o yaml prints the answer.
	file := filepath.Join(t.TempDir(), "placement.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: platform.example.io/v1alpha1\nkind: PlacementReport\nspec:\n  replicas: 4\n"+
		"  requests: {cpu: 1500m, memory: 256Mi}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The simulation's last pods are deleted but maybe not yet mirrored:
	// the answer is the first one's once they are.
	want := answers["cpu-heavy"].Status.Clusters[0].Fits
	var out string
	eventually(t, "the report answers as before the simulation", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out = e.kubectl(t, "create", "-f", file, "-o", "yaml")
		return strings.Contains(out, fmt.Sprintf("fits: %d", 2*want)), out
	})
	for _, line := range []string{fmt.Sprintf("fits: %d", 2*want), "cluster: east", "cluster: local", "mirroring: Synced", "stale: false", "fitsAll: " + fmt.Sprint(want >= 4)} {
		if !strings.Contains(out, line) {
			t.Errorf("kubectl create -o yaml lacks %q:\n%s", line, out)
		}
	}

	// The second member goes away: its answer is what was last mirrored,
	// flagged stale with its age, after the current one, whose data age
	// (its mirror heartbeat's) is within the bound.
	fwd.Stop()
	eventually(t, "east unreachable", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out := e.jsonpath(ctx, `{.status.mirroring.state}`, "get", "clustercapacity", "east")
		return out == "Unreachable", out
	})
	time.Sleep(1100 * time.Millisecond) // a data age of at least a second
	r, err := e.platform.PlatformV1alpha1().PlacementReports().Create(ctx, &v1alpha1.PlacementReport{Spec: shapes[0].spec()}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Status.Clusters; len(c) != 2 || c[0].Cluster != "local" || c[0].Stale || c[0].DataAge == nil || c[0].DataAge.Duration > registry.DefaultMemberStaleAfter ||
		c[1].Cluster != "east" || !c[1].Stale || c[1].Mirroring != "Unreachable" || c[1].DataAge == nil || c[1].DataAge.Duration < time.Second || c[1].Fits != want {
		t.Errorf("with east unreachable: %+v; want local current first, east stale with a data age and its last answer %d", c, want)
	}

	e.testPlacementAccess(t)
}

// schedule creates n pods of shape s without a node, waits until
// kube-scheduler has decided each (bound, or PodScheduled=False), returns
// how many it bound, and deletes them.
func (e *env) schedule(t *testing.T, s placementShape, n int) int {
	t.Helper()
	ctx := t.Context()
	for i := range n {
		create(t, e.kube.CoreV1().Pods("placed").Create, s.pod("placed", i))
	}
	var bound int
	eventually(t, "kube-scheduler decides every "+s.name+" pod", 2*time.Minute, func(ctx context.Context) (bool, string) {
		pods, err := e.kube.CoreV1().Pods("placed").List(ctx, metav1.ListOptions{LabelSelector: "shape=" + s.name})
		if err != nil {
			return false, err.Error()
		}
		bound = 0
		var undecided []string
		for _, p := range pods.Items {
			switch {
			case p.Spec.NodeName != "":
				bound++
			case !unschedulable(&p):
				undecided = append(undecided, p.Name)
			}
		}
		return len(undecided) == 0 && len(pods.Items) == n, fmt.Sprintf("%d pods, %d bound, undecided %v", len(pods.Items), bound, undecided)
	})
	zero := int64(0)
	if err := e.kube.CoreV1().Pods("placed").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: "shape=" + s.name}); err != nil {
		t.Fatal(err)
	}
	return bound
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// testPlacementAccess: a user allowed to create reports and to get local's
// ClusterCapacity gets local's answer, and 403 for east and for the fleet.
func (e *env) testPlacementAccess(t *testing.T) {
	ctx := t.Context()
	if _, err := e.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "local-placement"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"platform.example.io"}, Resources: []string{"placementreports"}, Verbs: []string{"create"}},
			{APIGroups: []string{"platform.example.io"}, Resources: []string{"clustercapacities"}, ResourceNames: []string{"local"}, Verbs: []string{"get"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-local-placement"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "local-placement"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "tenant"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := e.cp.UserConfig("tenant")
	if err != nil {
		t.Fatal(err)
	}
	tenant := versioned.NewForConfigOrDie(cfg).PlatformV1alpha1().PlacementReports()
	spec := v1alpha1.PlacementReportSpec{Requests: map[string]resource.Quantity{"cpu": resource.MustParse("1")}}
	eventually(t, "the tenant's RBAC in effect", mirrorTimeout, func(ctx context.Context) (bool, string) {
		spec.Clusters = []string{"local"}
		r, err := tenant.Create(ctx, &v1alpha1.PlacementReport{Spec: spec}, metav1.CreateOptions{})
		return err == nil && len(r.Status.Clusters) == 1 && r.Status.Clusters[0].Cluster == "local", fmt.Sprint(err)
	})
	for _, clusters := range [][]string{{"east"}, {"local", "east"}, nil} {
		spec.Clusters = clusters
		_, err := tenant.Create(ctx, &v1alpha1.PlacementReport{Spec: spec}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("tenant asking %v: %v, want 403", clusters, err)
		} else if !strings.Contains(err.Error(), "clustercapacities") {
			t.Errorf("tenant asking %v: the 403 does not name the permission: %v", clusters, err)
		}
	}

	// The node oracle is closed: the tenant may not list NodeCapacities, so
	// questions about nodes are 403 alike for a node that exists and one
	// that does not, and plain answers do not say how many nodes have room.
	spec.Clusters = []string{"local"}
	r, err := tenant.Create(ctx, &v1alpha1.PlacementReport{Spec: spec}, metav1.CreateOptions{})
	if err != nil || r.Status.Clusters[0].Nodes != nil || r.Status.Clusters[0].Fits == 0 {
		t.Errorf("the tenant's plain report: %+v, %v; want fits without nodes", r.Status, err)
	}
	named := func(node string) v1alpha1.PlacementReportSpec {
		s := spec
		s.Tolerations = []v1alpha1.Toleration{{Operator: "Exists"}}
		s.NodeAffinity = []v1alpha1.NodeSelectorTerm{{MatchFields: []v1alpha1.NodeSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{node}}}}}
		return s
	}
	var answers []string
	for _, node := range []string{"small-a1", "no-such-node"} {
		_, err := tenant.Create(ctx, &v1alpha1.PlacementReport{Spec: named(node)}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot list resource "nodecapacities"`) ||
			!strings.Contains(err.Error(), "asks about nodes (spec.nodeAffinity, spec.tolerations)") {
			t.Errorf("tenant asking about node %s: %v; want 403 naming list nodecapacities and the fields", node, err)
		}
		answers = append(answers, strings.ReplaceAll(fmt.Sprint(err), node, "NODE"))
	}
	if answers[0] != answers[1] {
		t.Errorf("the tenant tells an existing node from an unknown one:\n%s\n%s", answers[0], answers[1])
	}
	// The admin may list the nodes: told how many have room.
	r, err = e.platform.PlatformV1alpha1().PlacementReports().Create(ctx, &v1alpha1.PlacementReport{Spec: named("small-a1")}, metav1.CreateOptions{})
	if err != nil || r.Status.Clusters[0].Nodes == nil || *r.Status.Clusters[0].Nodes != 1 {
		t.Errorf("the admin asking about small-a1: %+v, %v; want nodes 1", r.Status, err)
	}

	// Bodies built to load the server are refused in full, naming the
	// limit, while another client's lists go on (the times are logged:
	// docs/benchmarks.md has none to keep, this is no benchmark).
	huge := []struct {
		what, want string
		spec       func(*v1alpha1.PlacementReportSpec)
	}{
		{"100,000 tolerations", "spec.tolerations: Too many: 100000: must have at most 100 items (this server's --max-query-tolerations)",
			func(s *v1alpha1.PlacementReportSpec) {
				s.Tolerations = make([]v1alpha1.Toleration, 100_000) // 2.2 MB of JSON, within the 3 MiB a request may have
				for i := range s.Tolerations {
					s.Tolerations[i] = v1alpha1.Toleration{Operator: "Exists"}
				}
			}},
		{"100,000 requested resources", "spec.requests: Too many: 100000: must have at most 32 items (this server's --max-query-resources)",
			func(s *v1alpha1.PlacementReportSpec) {
				s.Requests = make(map[string]resource.Quantity, 100_000)
				for i := range 100_000 {
					s.Requests[fmt.Sprintf("example.com/r%d", i)] = resource.MustParse("1")
				}
			}},
		{"100,000 node selector labels", "spec.nodeSelector: Too many: 100000: must have at most",
			func(s *v1alpha1.PlacementReportSpec) {
				s.NodeSelector = make(map[string]string, 100_000)
				for i := range 100_000 {
					s.NodeSelector[fmt.Sprintf("example.com/l%d", i)] = "x"
				}
			}},
		{"50,000 devices", "spec.devices: Too many: 50000: must have at most 32 items (this server's --max-query-resources)",
			func(s *v1alpha1.PlacementReportSpec) {
				s.Devices = make([]v1alpha1.DeviceRequest, 50_000) // 100,000 exceed the 3 MiB a request may have
				for i := range s.Devices {
					s.Devices[i] = v1alpha1.DeviceRequest{Driver: fmt.Sprintf("d%d.example.com", i), Count: 1}
				}
			}},
		{"100,000 clusters", "spec.clusters: Too many: 100000: must have at most 1000 items (this server's --max-query-clusters)",
			func(s *v1alpha1.PlacementReportSpec) {
				s.Clusters = make([]string, 100_000)
				for i := range s.Clusters {
					s.Clusters[i] = fmt.Sprintf("member-%d", i)
				}
			}},
		{"10,000 affinity terms", "spec.nodeAffinity: Too many: 10000: must have at most 8 items (this server's --max-query-affinity-terms)",
			func(s *v1alpha1.PlacementReportSpec) {
				s.NodeAffinity = make([]v1alpha1.NodeSelectorTerm, 10_000)
				for i := range s.NodeAffinity {
					s.NodeAffinity[i] = v1alpha1.NodeSelectorTerm{MatchExpressions: []v1alpha1.NodeSelectorRequirement{
						{Key: "zone", Operator: "In", Values: []string{fmt.Sprint(i)}}}}
				}
			}},
	}
	listsCtx, stopLists := context.WithCancel(ctx)
	listed := make(chan []time.Duration, 1)
	go func() {
		var took []time.Duration
		for listsCtx.Err() == nil {
			start := time.Now()
			if _, err := e.platform.PlatformV1alpha1().ClusterCapacities().List(listsCtx, metav1.ListOptions{}); err != nil && listsCtx.Err() == nil {
				t.Errorf("another client's list while huge bodies were refused: %v", err)
			}
			took = append(took, time.Since(start))
		}
		listed <- took
	}()
	for _, h := range huge {
		body := spec
		h.spec(&body)
		start := time.Now()
		_, err := e.platform.PlatformV1alpha1().PlacementReports().Create(ctx, &v1alpha1.PlacementReport{Spec: body}, metav1.CreateOptions{})
		took := time.Since(start)
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), h.want) {
			t.Errorf("%s: %v; want 400 saying %q", h.what, err, h.want)
		}
		t.Logf("%s refused in %s", h.what, took.Round(time.Millisecond))
	}
	stopLists()
	took := <-listed
	t.Logf("another client's %d lists meanwhile: p99 %s, max %s", len(took), percentile(took, 0.99), slices.Max(took))
}

// forwardedMember lists the hosting cluster once more as member name in the
// member kubeconfig directory dir, reached through a forwarder the test can
// take away.
func (e *env) forwardedMember(t *testing.T, dir, name string) *framework.Relay {
	t.Helper()
	fwd := startForwarder(t, strings.TrimPrefix(e.cp.KubeAPIServerURL(), "https://"))
	cfg, err := clientcmd.LoadFromFile(e.cp.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + fwd.Addr()
	}
	if err := clientcmd.WriteToFile(*cfg, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return fwd
}

func startForwarder(t *testing.T, target string) *framework.Relay {
	r, err := framework.StartRelay(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}
