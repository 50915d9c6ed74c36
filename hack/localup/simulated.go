package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/test/framework"
)

const simulatedReadyTimeout = time.Minute

// simulatedNodes are kwok nodes of the local cluster: two plain workers, one
// cordoned, one tainted for a dedicated team.
var simulatedNodes = []framework.SimulatedNode{
	{Name: "worker-1", Capacity: nodeResources("4", "16Gi"), Allocatable: nodeResources("3920m", "15Gi"),
		Labels: map[string]string{"topology.kubernetes.io/zone": "zone-a"}},
	{Name: "worker-2", Capacity: nodeResources("8", "32Gi"), Allocatable: nodeResources("7910m", "31Gi"),
		Labels: map[string]string{"topology.kubernetes.io/zone": "zone-b"}},
	{Name: "worker-3", Capacity: nodeResources("4", "16Gi"), Allocatable: nodeResources("3920m", "15Gi"),
		Labels: map[string]string{"topology.kubernetes.io/zone": "zone-a"}, Unschedulable: true},
	{Name: "worker-4", Capacity: nodeResources("8", "64Gi"), Allocatable: nodeResources("7910m", "62Gi"),
		Labels: map[string]string{"topology.kubernetes.io/zone": "zone-b", "dedicated": "gpu"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}},
}

// simulatedPod is one pod of the local cluster; an empty node leaves it
// Pending (no scheduler runs).
type simulatedPod struct {
	namespace, name, node string
	cpu, memory           string
	tolerateGPU           bool
}

var simulatedPods = []simulatedPod{
	{namespace: "team-a", name: "web-1", node: "worker-1", cpu: "500m", memory: "768Mi"},
	{namespace: "team-a", name: "web-2", node: "worker-2", cpu: "500m", memory: "768Mi"},
	{namespace: "team-a", name: "web-3", node: "worker-3", cpu: "500m", memory: "768Mi"}, // still on the cordoned node
	{namespace: "team-a", name: "report", cpu: "2", memory: "4Gi"},                       // Pending
	{namespace: "team-b", name: "api-1", node: "worker-1", cpu: "250m", memory: "512Mi"},
	{namespace: "team-b", name: "api-2", node: "worker-2", cpu: "250m", memory: "512Mi"},
	{namespace: "team-b", name: "train", node: "worker-4", cpu: "3", memory: "24Gi", tolerateGPU: true},
}

// simulatedQuotas cap each team's requests.
var simulatedQuotas = map[string]corev1.ResourceList{
	"team-a": {"requests.cpu": resource.MustParse("8"), "requests.memory": resource.MustParse("16Gi"), "pods": resource.MustParse("20")},
	"team-b": {"requests.cpu": resource.MustParse("4"), "requests.memory": resource.MustParse("32Gi"), "pods": resource.MustParse("10")},
}

func nodeResources(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// seedSimulatedCluster creates the simulated nodes, the team namespaces with
// their quotas, and the pods, and waits until the bound pods are Running.
func seedSimulatedCluster(ctx context.Context, cp *framework.ControlPlane) error {
	client, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		return fmt.Errorf("build kube-apiserver client: %w", err)
	}
	for _, n := range simulatedNodes {
		if _, err := cp.CreateSimulatedNode(ctx, n); err != nil {
			return err
		}
	}
	for ns, hard := range simulatedQuotas {
		if err := createQuotaNamespace(ctx, client, ns, hard); err != nil {
			return err
		}
	}
	for _, p := range simulatedPods {
		if _, err := client.CoreV1().Pods(p.namespace).Create(ctx, p.object(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s/%s: %w", p.namespace, p.name, err)
		}
	}
	if err := waitBoundPodsRunning(ctx, client); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Seeded the simulated cluster", "nodes", len(simulatedNodes), "pods", len(simulatedPods))
	return nil
}

// createQuotaNamespace creates namespace ns with ResourceQuota "compute" and
// waits until the quota controller has taken it up: pods admitted before that
// would not be charged.
func createQuotaNamespace(ctx context.Context, client kubernetes.Interface, ns string, hard corev1.ResourceList) error {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}
	if _, err := client.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create resource quota %s/compute: %w", ns, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, simulatedReadyTimeout, true, func(ctx context.Context) (bool, error) {
		q, err := client.CoreV1().ResourceQuotas(ns).Get(ctx, quota.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(q.Status.Hard) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("resource quota %s/compute has no status (is kube-controller-manager's resourcequota-controller running?): %w", ns, err)
	}
	return nil
}

func (p simulatedPod) object() *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: map[string]string{"app": p.name}},
		Spec: corev1.PodSpec{
			NodeName: p.node,
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse(p.cpu),
					corev1.ResourceMemory: resource.MustParse(p.memory),
				}},
			}},
		},
	}
	if p.tolerateGPU {
		pod.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	}
	return pod
}

// waitBoundPodsRunning waits until kwok runs every pod that has a node.
func waitBoundPodsRunning(ctx context.Context, client kubernetes.Interface) error {
	var waiting []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, simulatedReadyTimeout, true, func(ctx context.Context) (bool, error) {
		waiting = waiting[:0]
		for _, p := range simulatedPods {
			if p.node == "" {
				continue
			}
			pod, err := client.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if pod.Status.Phase != corev1.PodRunning {
				waiting = append(waiting, p.namespace+"/"+p.name)
			}
		}
		return len(waiting) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("simulated pods not Running (%v; see kwok.log in the work directory): %w", waiting, err)
	}
	return nil
}
