package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/platform-apiserver/test/framework"
)

const (
	// fleetMembers copies of the simulated cluster are mirrored: the hosting
	// cluster fleetHostingID (which leader election needs for its Leases)
	// and fleetMembers-1 kubeconfig files in the member directory.
	fleetMembers   = 20
	fleetHostingID = "fleet-00"
	// fleetPods pods in fleetNamespaces namespaces, syncPod's layout (4 a node).
	fleetPods       = 20000
	fleetNamespaces = fleetPods / podsPerSyncNamespace
	// fleetMetricsCoverage of the nodes must have NodeMetrics before the runs.
	fleetMetricsCoverage = 0.99
	// metrics-server's defaults instead of the framework's 10s/5s: it
	// scrapes every node at once, and kwok answers only part of such a
	// burst of 5,000 within 5s on two cores.
	fleetMetricResolution = 60 * time.Second
	fleetKubeletTimeout   = 50 * time.Second
	// fleetKwokConfig gives kwok's node and pod stages 16 workers instead of 4.
	fleetKwokConfig = `
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodePlayStageParallelism: 16
  podPlayStageParallelism: 16
`
)

var fleetLease = flag.String("fleet-lease", "15s,10s,2s",
	"BenchmarkFleet: the replicas' --leader-elect-lease-duration, --leader-elect-renew-deadline and --leader-elect-retry-period, comma-separated")

func fleetMemberID(i int) string { return fmt.Sprintf("fleet-%02d", i) }

func fleetMemberIDs() []string {
	ids := make([]string, fleetMembers)
	for i := range ids {
		ids[i] = fleetMemberID(i)
	}
	return ids
}

// fleetArgs are every replica's flags besides the member directory:
// discovery of the hosting cluster (the framework's kube-apiserver, whose
// kubeconfig is in the process's working directory) and leader election
// with the timings of -fleet-lease.
func fleetArgs() ([]string, error) {
	parts := strings.Split(*fleetLease, ",")
	names := []string{"lease-duration", "renew-deadline", "retry-period"}
	if len(parts) != len(names) {
		return nil, fmt.Errorf("-fleet-lease=%q: want three durations, e.g. 15s,10s,2s", *fleetLease)
	}
	args := []string{"--cluster-id=" + fleetHostingID, "--kubeconfig=kubeconfig", "--leader-elect=true"}
	for i, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("-fleet-lease=%q: %w", *fleetLease, err)
		}
		args = append(args, "--leader-elect-"+names[i]+"="+d.String())
	}
	return args, nil
}

// fleetEnv is kube-apiserver with kwok simulating nodeCount nodes and
// fleetPods pods, metrics-server scraping them, and the member directory;
// the sub-benchmarks start replicas of their own.
type fleetEnv struct {
	*env
	want              registryCounts // one member, mirrored under every cluster id
	nodeSeq, churnSeq int
	results           []fleetResult
}

func startFleetEnv(b *testing.B) *fleetEnv {
	args, err := fleetArgs()
	must(b, err)
	f := &fleetEnv{}
	f.env = benchEnv(b, envOptions{name: "fleet", platformArgs: args, memberDir: true, simulator: true, stopPlatform: true,
		prepare: func(ctx context.Context, e *env) error {
			f.env = e
			return f.prepare(ctx)
		}})
	return f
}

// prepare tunes the simulator, seeds the cluster, waits until kwok runs it
// and metrics-server has (nearly) every node's usage, and writes the member
// directory.
func (f *fleetEnv) prepare(ctx context.Context) error {
	// kwok without node Leases (renewing 5,000 starves two cores, and
	// nothing reads them) and with fleetKwokConfig.
	base, err := os.ReadFile(filepath.Join(f.cp.WorkDir(), "kwok.yaml"))
	if err != nil {
		return fmt.Errorf("read the framework's kwok configuration: %w", err)
	}
	config := filepath.Join(f.cp.WorkDir(), "kwok-fleet.yaml")
	if err := os.WriteFile(config, append(base, fleetKwokConfig...), 0o644); err != nil {
		return err
	}
	if err := f.cp.RestartSimulatorComponent(ctx, "kwok", map[string]string{"config": config, "node-lease-duration-seconds": "0"}); err != nil {
		return err
	}
	if err := f.cp.RestartSimulatorComponent(ctx, "metrics-server", map[string]string{
		"metric-resolution": fleetMetricResolution.String(), "kubelet-request-timeout": fleetKubeletTimeout.String(),
	}); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	nodes := seedStep{"simulated Nodes", nodeCount, func(ctx context.Context) error {
		return parallelCreate(ctx, nodeCount, func(ctx context.Context, i int) error { return f.createSimulatedNode(ctx, i, now) })
	}}
	if err := runSteps(ctx, "fleet", nodes, f.namespacesStep(fleetNamespaces), f.podsStep(fleetPods),
		seedStep{"Ready nodes (kwok)", nodeCount, f.waitNodesReady},
		seedStep{"Running pods (kwok)", fleetPods, f.waitPodsRunning},
		seedStep{"NodeMetrics (metrics-server)", nodeCount, f.waitNodeMetrics}); err != nil {
		return fmt.Errorf("seed the simulated cluster: %w", err)
	}
	if f.want, err = f.memberCounts(ctx); err != nil {
		return err
	}
	if f.want.nodes != nodeCount || f.want.pods != fleetPods || f.want.namespaces < fleetNamespaces {
		return fmt.Errorf("kube-apiserver holds %s, want %d nodes, %d pods and at least %d namespaces",
			f.want, nodeCount, fleetPods, fleetNamespaces)
	}
	kubeconfig, err := os.ReadFile(f.cp.AdminKubeconfig())
	if err != nil {
		return err
	}
	for i := 1; i < fleetMembers; i++ {
		if err := os.WriteFile(filepath.Join(f.memberDir, fleetMemberID(i)), kubeconfig, 0o600); err != nil {
			return fmt.Errorf("write member kubeconfig: %w", err)
		}
	}
	return nil
}

// createSimulatedNode creates node i as kwok simulates it, with the list
// benchmarks' labels, size, taints and cordon (kwok keeps every node Ready).
// A merge patch then drops the not-ready taint admission adds.
func (f *fleetEnv) createSimulatedNode(ctx context.Context, i int, now time.Time) error {
	n := storeNode(i, now)
	capacity := func(cpu, mem, pods int64) corev1.ResourceList {
		return corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
		}
	}
	var taints []corev1.Taint
	for _, t := range n.Taints {
		if t.Key != "node.kubernetes.io/unreachable" {
			taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
		}
	}
	node := framework.SimulatedNodeObject(framework.SimulatedNode{
		Name:          n.Name,
		Capacity:      capacity(n.Capacity.CPUMillis, n.Capacity.MemoryBytes, n.Capacity.Pods),
		Allocatable:   capacity(n.Allocatable.CPUMillis, n.Allocatable.MemoryBytes, n.Allocatable.Pods),
		Labels:        n.Labels,
		Taints:        taints,
		Unschedulable: n.Unschedulable,
	})
	created, err := f.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create Node %s: %w", n.Name, err)
	}
	if len(created.Spec.Taints) == len(taints) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": taints}})
	if err != nil {
		return err
	}
	if _, err := f.kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("set taints of Node %s: %w", n.Name, err)
	}
	return nil
}

func (f *fleetEnv) waitNodesReady(ctx context.Context) error {
	return pollUntil(ctx, 5*time.Second, 10*time.Minute, func(ctx context.Context) (bool, string, error) {
		ready, total := 0, 0
		err := eachPage(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return f.kube.CoreV1().Nodes().List(ctx, o)
		},
			func(page runtime.Object) {
				for _, n := range page.(*corev1.NodeList).Items {
					total++
					if slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
						return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
					}) {
						ready++
					}
				}
			})
		if err != nil {
			return false, err.Error(), nil
		}
		return total == nodeCount && ready == nodeCount, fmt.Sprintf("%d of %d nodes Ready", ready, total), nil
	})
}

// waitPodsRunning asks for one page of pods not Running (filtered in
// kube-apiserver), so a poll stays cheap while kwok is busy.
func (f *fleetEnv) waitPodsRunning(ctx context.Context) error {
	return pollUntil(ctx, 5*time.Second, 10*time.Minute, func(ctx context.Context) (bool, string, error) {
		page, err := f.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Running", Limit: 500})
		if err != nil {
			return false, err.Error(), nil
		}
		return len(page.Items) == 0 && page.Continue == "", fmt.Sprintf("at least %d pods not Running", len(page.Items)), nil
	})
}

// waitNodeMetrics lists metrics.k8s.io NodeMetrics through kube-apiserver,
// as discovery's scraper does, until fleetMetricsCoverage of the nodes have them.
func (f *fleetEnv) waitNodeMetrics(ctx context.Context) error {
	want := int(fleetMetricsCoverage * nodeCount)
	return pollUntil(ctx, 5*time.Second, 10*time.Minute, func(ctx context.Context) (bool, string, error) {
		body, err := f.kube.CoreV1().RESTClient().Get().AbsPath("/apis/" + framework.MetricsGroupVersion + "/nodes").DoRaw(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return false, fmt.Sprintf("decode NodeMetrics list: %v", err), nil
		}
		return len(list.Items) >= want, fmt.Sprintf("NodeMetrics of %d nodes, want %d", len(list.Items), want), nil
	})
}
