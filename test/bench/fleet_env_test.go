package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/platform-apiserver/test/framework"
)

const (
	// fleetMembers member clusters are mirrored: the hosting cluster under
	// fleetHostingID (leader election needs a hosting cluster for its
	// Leases, and a hosting cluster is always mirrored) and fleetMembers-1
	// kubeconfig files in the member directory. All are the same simulated
	// cluster, so the registry holds fleetMembers copies of it.
	fleetMembers   = 20
	fleetHostingID = "fleet-00"
	// fleetPods pods are bound to the nodeCount simulated nodes (4 each)
	// in fleetNamespaces namespaces of podsPerSyncNamespace pods: syncPod's
	// layout, pod j on node j%nodeCount.
	fleetPods       = 20000
	fleetNamespaces = fleetPods / podsPerSyncNamespace
	// fleetMetricsCoverage of the nodes must have NodeMetrics before the
	// sub-benchmarks start, so every scrape covers the fleet.
	fleetMetricsCoverage = 0.99
)

// fleetLease sets the replicas' Lease timings: lease duration, renew
// deadline (the timeout of a round of Lease calls) and retry period. The
// default is the server's.
var fleetLease = flag.String("fleet-lease", "15s,10s,2s",
	"BenchmarkFleet: the replicas' --leader-elect-lease-duration, --leader-elect-renew-deadline and --leader-elect-retry-period, comma-separated")

// fleetLeaseArgs turns -fleet-lease into the replicas' flags.
func fleetLeaseArgs() ([]string, error) {
	parts := strings.Split(*fleetLease, ",")
	names := []string{"lease-duration", "renew-deadline", "retry-period"}
	if len(parts) != len(names) {
		return nil, fmt.Errorf("-fleet-lease=%q: want three durations, e.g. 15s,10s,2s", *fleetLease)
	}
	args := make([]string, len(parts))
	for i, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("-fleet-lease=%q: %w", *fleetLease, err)
		}
		args[i] = "--leader-elect-" + names[i] + "=" + d.String()
	}
	return args, nil
}

// fleetMemberID is the cluster id of member i (0 is the hosting cluster).
func fleetMemberID(i int) string { return fmt.Sprintf("fleet-%02d", i) }

// fleetMemberIDs are every member's cluster id, fleet-00 first.
func fleetMemberIDs() []string {
	ids := make([]string, fleetMembers)
	for i := range ids {
		ids[i] = fleetMemberID(i)
	}
	return ids
}

// fleetArgs are the platform-apiserver flags of every replica besides the
// member directory (envOptions.memberDir): discovery of the hosting cluster
// (its own kube-apiserver, whose admin kubeconfig is in the framework's work
// directory, the process's working directory), which holds the discovery
// Leases (in kube-system, the namespace of a server outside a pod); leader
// election on with the timings of -fleet-lease. The framework's first start
// gets them too, with the directory still empty.
func fleetArgs() ([]string, error) {
	lease, err := fleetLeaseArgs()
	if err != nil {
		return nil, err
	}
	return append([]string{"--cluster-id=" + fleetHostingID, "--kubeconfig=kubeconfig", "--leader-elect=true"}, lease...), nil
}

// fleetEnv is the fleet benchmark's control plane: kube-apiserver with kwok
// simulating nodeCount nodes and fleetPods pods and metrics-server scraping
// them, PostgreSQL (each sub-benchmark gets a database of its own), and the
// member directory. Its framework platform-apiserver is stopped once the
// control plane is up; the sub-benchmarks start their own replicas.
type fleetEnv struct {
	*env
	// want is what one member holds, which a complete sync mirrors under
	// every cluster id.
	want registryCounts
	// nodeSeq numbers the freshness changes, churnSeq the background churn.
	nodeSeq, churnSeq int
	results           []fleetResult
}

func startFleetEnv(b *testing.B) *fleetEnv {
	args, err := fleetArgs()
	if err != nil {
		b.Fatal(err)
	}
	f := &fleetEnv{}
	f.env = benchEnv(b, envOptions{name: "fleet", platformArgs: args, memberDir: true, simulator: true, stopPlatform: true,
		prepare: func(ctx context.Context, e *env) error {
			f.env = e
			return f.prepare(ctx)
		}})
	return f
}

// prepare tunes the simulator, seeds the simulated cluster, waits until its
// pods run and metrics-server has usage of (nearly) every node, and writes
// the member directory.
func (f *fleetEnv) prepare(ctx context.Context) error {
	if err := f.tuneSimulator(ctx); err != nil {
		return err
	}
	if err := f.seed(ctx); err != nil {
		return fmt.Errorf("seed the simulated cluster: %w", err)
	}
	var err error
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

// fleetKwokConfig is appended to the framework's kwok configuration: more
// workers for the node and pod stages than kwok's 4 each, so 5,000 nodes
// and 20,000 pods become Ready and Running in minutes, not tens of minutes.
const fleetKwokConfig = `
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodePlayStageParallelism: 16
  podPlayStageParallelism: 16
`

// fleetMetricResolution and fleetKubeletTimeout are metrics-server's
// scrape period and per-node timeout here, instead of the framework's 10s
// and 5s (its minimum, for tests that wait for usage): its defaults. It
// scrapes every node at once each period, and kwok, serving 5,000
// simulated kubelets on a shared two-core machine, answers only about a
// quarter of such a burst within 5s. Discovery scrapes every 30s, so every
// other scrape of a member finds the samples it already has, as it does
// against a metrics-server with its default settings.
const (
	fleetMetricResolution = 60 * time.Second
	fleetKubeletTimeout   = 50 * time.Second
)

// tuneSimulator restarts kwok and metrics-server for a fleet of thousands
// of nodes on a small machine, before any node exists:
//   - kwok without node Leases: with them it manages only the nodes whose
//     Lease it holds and renews one per node every 10s (500 writes a
//     second for 5,000 nodes), which starves everything else on two
//     cores; without kube-controller-manager nothing reads them;
//   - kwok with more stage workers (fleetKwokConfig);
//   - metrics-server at fleetMetricResolution and fleetKubeletTimeout.
func (f *fleetEnv) tuneSimulator(ctx context.Context) error {
	base, err := os.ReadFile(filepath.Join(f.cp.WorkDir(), "kwok.yaml"))
	if err != nil {
		return fmt.Errorf("read the framework's kwok configuration: %w", err)
	}
	config := filepath.Join(f.cp.WorkDir(), "kwok-fleet.yaml")
	if err := os.WriteFile(config, append(base, fleetKwokConfig...), 0o644); err != nil {
		return err
	}
	if err := f.cp.RestartSimulatorComponent(ctx, "kwok", map[string]string{
		"config":                      config,
		"node-lease-duration-seconds": "0",
	}); err != nil {
		return err
	}
	return f.cp.RestartSimulatorComponent(ctx, "metrics-server", map[string]string{
		"metric-resolution":       fleetMetricResolution.String(),
		"kubelet-request-timeout": fleetKubeletTimeout.String(),
	})
}

// seed creates the simulated nodes (the list benchmarks' shapes, managed by
// kwok), the namespaces and the pods, and waits until kwok has made them
// Ready and Running and metrics-server reports the nodes' usage.
func (f *fleetEnv) seed(ctx context.Context) error {
	now := time.Now().UTC().Truncate(time.Second)
	nodes := seedStep{"simulated Nodes", nodeCount, func(ctx context.Context) error {
		return parallelCreate(ctx, nodeCount, func(ctx context.Context, i int) error { return f.createSimulatedNode(ctx, i, now) })
	}}
	return runSteps(ctx, "fleet", nodes, f.namespacesStep(fleetNamespaces), f.podsStep(fleetPods),
		seedStep{"Ready nodes (kwok)", nodeCount, f.waitNodesReady},
		seedStep{"Running pods (kwok)", fleetPods, f.waitPodsRunning},
		seedStep{"NodeMetrics (metrics-server)", nodeCount, f.waitNodeMetrics})
}

// createSimulatedNode creates node i as kwok simulates it, with the labels,
// size, taints and cordon of the list benchmarks' node i (kwok makes every
// node Ready, so there are no NotReady ones). kube-apiserver's
// TaintNodesByCondition admission adds a not-ready taint to a new Node,
// which the node lifecycle controller would remove once it is Ready; with
// none running, a merge patch sets the intended taints.
func (f *fleetEnv) createSimulatedNode(ctx context.Context, i int, now time.Time) error {
	n := storeNode(i, now)
	capacity := func(r int64, mem int64, pods int64) corev1.ResourceList {
		return corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(r, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
		}
	}
	var taints []corev1.Taint
	for _, t := range n.Taints {
		if t.Key == "node.kubernetes.io/unreachable" {
			continue // kwok keeps every node Ready
		}
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
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

// waitNodesReady polls until every node is Ready.
func (f *fleetEnv) waitNodesReady(ctx context.Context) error {
	return pollUntil(ctx, 5*time.Second, 10*time.Minute, func(ctx context.Context) (bool, string, error) {
		ready, total := 0, 0
		opts := metav1.ListOptions{Limit: 1000}
		for {
			page, err := f.kube.CoreV1().Nodes().List(ctx, opts)
			if err != nil {
				return false, err.Error(), nil
			}
			for _, n := range page.Items {
				total++
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			if opts.Continue = page.Continue; opts.Continue == "" {
				break
			}
		}
		return total == nodeCount && ready == nodeCount, fmt.Sprintf("%d of %d nodes Ready", ready, total), nil
	})
}

// waitPodsRunning polls until no pod is in another phase than Running. A
// poll asks for one page of such pods (the filter runs in kube-apiserver),
// so it stays cheap while kwok is busy with thousands.
func (f *fleetEnv) waitPodsRunning(ctx context.Context) error {
	return pollUntil(ctx, 5*time.Second, 10*time.Minute, func(ctx context.Context) (bool, string, error) {
		page, err := f.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Running", Limit: 500})
		if err != nil {
			return false, err.Error(), nil
		}
		return len(page.Items) == 0 && page.Continue == "", fmt.Sprintf("at least %d pods not Running", len(page.Items)), nil
	})
}

// waitNodeMetrics polls metrics.k8s.io until it has usage of
// fleetMetricsCoverage of the nodes.
func (f *fleetEnv) waitNodeMetrics(ctx context.Context) error {
	want := int(fleetMetricsCoverage * nodeCount)
	return pollUntil(ctx, 5*time.Second, 10*time.Minute, func(ctx context.Context) (bool, string, error) {
		n, err := f.nodeMetricsCount(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return n >= want, fmt.Sprintf("NodeMetrics of %d nodes, want %d", n, want), nil
	})
}

// nodeMetricsCount lists metrics.k8s.io NodeMetrics through kube-apiserver,
// as discovery's scraper does, and counts them.
func (f *fleetEnv) nodeMetricsCount(ctx context.Context) (int, error) {
	body, err := f.kube.CoreV1().RESTClient().Get().AbsPath("/apis/" + framework.MetricsGroupVersion + "/nodes").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, fmt.Errorf("decode NodeMetrics list: %w", err)
	}
	return len(list.Items), nil
}
