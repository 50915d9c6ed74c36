package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/platform-apiserver/test/framework"
)

const clusterLabel = "platform.example.io/cluster"

// eventually polls cond until it holds; on timeout it fails with cond's last message.
func eventually(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var ok bool
		ok, last = cond(ctx)
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: %v; last observation:\n%s", what, err, last)
	}
}

// jsonpath reads one field of a platform object with kubectl; "" when it cannot.
func (e *env) jsonpath(ctx context.Context, path string, args ...string) string {
	out, _, err := e.cp.Kubectl(ctx, append(args, "-o", "jsonpath="+path)...)
	if err != nil {
		return "error: " + err.Error()
	}
	return out
}

// nsView is what the mirror must show of a member namespace.
type nsView struct {
	Phase  string
	Labels map[string]string
	Pods   int64
	CPU    int64 // millis
	Memory int64
	Quotas []string
}

// nodeView is what the mirror must show of a member node.
type nodeView struct {
	Unschedulable bool
	Pods          int64
	CPU           int64
}

// mirrorDiff compares the member cluster (kube-apiserver) with its mirror
// read through the aggregator; it returns "" when they agree exactly.
func (e *env) mirrorDiff(ctx context.Context, cluster string) string {
	wantNS, wantNodes, err := e.memberViews(ctx)
	if err != nil {
		return err.Error()
	}
	gotNS, gotNodes, err := e.mirrorViews(ctx, cluster)
	if err != nil {
		return err.Error()
	}
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(mergeKeys(wantNS, gotNS))) {
		w, wok := wantNS[name]
		g, gok := gotNS[name]
		if wok != gok || fmt.Sprint(w) != fmt.Sprint(g) {
			diffs = append(diffs, fmt.Sprintf("namespace %s: member %v (exists %v), mirror %v (exists %v)", name, w, wok, g, gok))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(mergeKeys(wantNodes, gotNodes))) {
		w, wok := wantNodes[name]
		g, gok := gotNodes[name]
		if wok != gok || w != g {
			diffs = append(diffs, fmt.Sprintf("node %s: member %+v (exists %v), mirror %+v (exists %v)", name, w, wok, g, gok))
		}
	}
	return strings.Join(diffs, "\n")
}

func mergeKeys[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// memberViews computes the expected views from kube-apiserver. The test's
// pods have plain container requests, so the sum is simple.
func (e *env) memberViews(ctx context.Context) (map[string]nsView, map[string]nodeView, error) {
	nss, err := e.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	pods, err := e.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	quotas, err := e.kube.CoreV1().ResourceQuotas("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	nsv := map[string]nsView{}
	for _, ns := range nss.Items {
		labels := maps.Clone(ns.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		nsv[ns.Name] = nsView{Phase: string(ns.Status.Phase), Labels: labels}
	}
	nodev := map[string]nodeView{}
	for _, n := range nodes.Items {
		nodev[n.Name] = nodeView{Unschedulable: n.Spec.Unschedulable}
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		var cpu, mem int64
		for _, c := range p.Spec.Containers {
			cpu += c.Resources.Requests.Cpu().MilliValue()
			mem += c.Resources.Requests.Memory().Value()
		}
		v := nsv[p.Namespace]
		v.Pods, v.CPU, v.Memory = v.Pods+1, v.CPU+cpu, v.Memory+mem
		nsv[p.Namespace] = v
		if n, ok := nodev[p.Spec.NodeName]; ok {
			n.Pods, n.CPU = n.Pods+1, n.CPU+cpu
			nodev[p.Spec.NodeName] = n
		}
	}
	for _, q := range quotas.Items {
		v := nsv[q.Namespace]
		v.Quotas = append(v.Quotas, q.Name)
		slices.Sort(v.Quotas)
		nsv[q.Namespace] = v
	}
	return nsv, nodev, nil
}

// mirrorViews reads the cluster's views through the aggregator.
func (e *env) mirrorViews(ctx context.Context, cluster string) (map[string]nsView, map[string]nodeView, error) {
	sel := metav1.ListOptions{LabelSelector: clusterLabel + "=" + cluster}
	cns, err := e.platform.PlatformV1alpha1().ClusterNamespaces("").List(ctx, sel)
	if err != nil {
		return nil, nil, err
	}
	ncs, err := e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, sel)
	if err != nil {
		return nil, nil, err
	}
	nsv := map[string]nsView{}
	for _, cn := range cns.Items {
		labels := maps.Clone(cn.Labels)
		delete(labels, clusterLabel)
		v := nsView{
			Phase: string(cn.Status.Phase), Labels: labels, Pods: cn.Status.PodCount,
			CPU: cn.Status.Requests.CPU.MilliValue(), Memory: cn.Status.Requests.Memory.Value(),
		}
		for _, q := range cn.Status.Quotas {
			v.Quotas = append(v.Quotas, q.Name)
		}
		slices.Sort(v.Quotas)
		nsv[cn.Namespace] = v
	}
	nodev := map[string]nodeView{}
	for _, nc := range ncs.Items {
		nodev[nc.Status.NodeName] = nodeView{
			Unschedulable: nc.Status.Unschedulable, Pods: nc.Status.Requested.Pods, CPU: nc.Status.Requested.CPU.MilliValue(),
		}
	}
	return nsv, nodev, nil
}

// platformMetric sums the samples of a metric on the platform-apiserver's
// own /metrics whose labels contain every one of match.
func (e *env) platformMetric(ctx context.Context, name string, match ...string) (float64, error) {
	body, err := e.cp.PlatformMetrics(ctx)
	if err != nil {
		return 0, err
	}
	return framework.MetricSum(body, name, match...)
}

func compactEtcd(ctx context.Context, etcdURL string) (int64, error) {
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := postJSON(ctx, etcdURL+"/v3/kv/range", `{"key":"Lw==","limit":1}`, &rng); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(rng.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd revision %q: %w", rng.Header.Revision, err)
	}
	body := fmt.Sprintf(`{"revision":"%d","physical":true}`, rev)
	return rev, postJSON(ctx, etcdURL+"/v3/kv/compaction", body, nil)
}

func postJSON(ctx context.Context, url, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, buf.String())
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(buf.Bytes(), out)
}

func testNode(name string) *corev1.Node {
	q := resource.MustParse
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "test"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8Gi"), corev1.ResourcePods: q("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: q("3920m"), corev1.ResourceMemory: q("7Gi"), corev1.ResourcePods: q("110")},
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}},
		},
	}
}

// testPod is a pod with one container per request pair ("250m", "256Mi"), bound to node when set.
func testPod(namespace, name, node string, requests ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.PodSpec{NodeName: node},
	}
	for i := 0; i+1 < len(requests); i += 2 {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name:  fmt.Sprintf("c%d", i/2),
			Image: "registry.example/app:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(requests[i]), corev1.ResourceMemory: resource.MustParse(requests[i+1]),
			}},
		})
	}
	return p
}

// countsBy runs a query of (text, bigint) rows and returns them as a map.
func countsBy(t *testing.T, db *pgx.Conn, sql string) map[string]int64 {
	t.Helper()
	rows, err := db.Query(t.Context(), sql)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var key string
		var n int64
		if err := rows.Scan(&key, &n); err != nil {
			t.Fatal(err)
		}
		out[key] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
