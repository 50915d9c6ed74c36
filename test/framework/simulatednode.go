package framework

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

const simulatedNodeReadyTimeout = time.Minute

// annotationResourceMetricsPath tells metrics-server where a node's
// /metrics/resource is; kwok serves every node's under its own path.
const annotationResourceMetricsPath = "metrics.k8s.io/resource-metrics-path"

// SimulatedNode describes a node for CreateSimulatedNode.
type SimulatedNode struct {
	Name string
	// Capacity defaults to DefaultSimulatedNodeCapacity.
	Capacity corev1.ResourceList
	// Allocatable defaults to Capacity.
	Allocatable corev1.ResourceList
	// Labels are added to the kwok and kubernetes.io labels the node gets.
	Labels map[string]string
	Taints []corev1.Taint
	// Unschedulable cordons the node.
	Unschedulable bool
}

// DefaultSimulatedNodeCapacity is a small worker: 4 CPUs, 16Gi, 110 pods.
func DefaultSimulatedNodeCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// CreateSimulatedNode creates a Node that kwok manages and waits until it is
// Ready. Pods bound to it (spec.nodeName; there is no scheduler) become
// Running, and metrics-server reports its usage after about two
// MetricResolution periods: its pods' usage (a share of their requests, or
// the kwok.x-k8s.io/usage-cpu and usage-memory pod annotations) plus a small
// constant overhead. It needs Options.StartSimulator.
func (cp *ControlPlane) CreateSimulatedNode(ctx context.Context, spec SimulatedNode) (*corev1.Node, error) {
	if cp.sim == nil {
		return nil, errors.New("create simulated node: the simulator is not running (set Options.StartSimulator)")
	}
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return nil, fmt.Errorf("build kube-apiserver client: %w", err)
	}
	node := simulatedNodeObject(spec)
	// Nodes accept status on create, so kwok's node-initialize stage keeps
	// this capacity instead of its defaults.
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create simulated node %s: %w", spec.Name, err)
	}
	ready, err := waitNodeReady(ctx, client, spec.Name)
	if err != nil {
		return nil, fmt.Errorf("simulated node %s: %w (is kwok running? see %s)", spec.Name, err, cp.sim.kwok.logPath())
	}
	klog.FromContext(ctx).Info("Simulated node ready", "node", klog.KObj(ready))
	return ready, nil
}

func simulatedNodeObject(spec SimulatedNode) *corev1.Node {
	capacity := spec.Capacity
	if capacity == nil {
		capacity = DefaultSimulatedNodeCapacity()
	}
	allocatable := spec.Allocatable
	if allocatable == nil {
		allocatable = capacity
	}
	labels := map[string]string{
		kwokNodeLabel:            kwokNodeLabelValue,
		"kubernetes.io/hostname": spec.Name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
	}
	maps.Copy(labels, spec.Labels)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   spec.Name,
			Labels: labels,
			Annotations: map[string]string{
				kwokNodeAnnotation:            kwokNodeAnnotationValue,
				annotationResourceMetricsPath: "/metrics/nodes/" + spec.Name + "/metrics/resource",
			},
		},
		Spec:   corev1.NodeSpec{Taints: spec.Taints, Unschedulable: spec.Unschedulable},
		Status: corev1.NodeStatus{Capacity: capacity.DeepCopy(), Allocatable: allocatable.DeepCopy()},
	}
}

// waitNodeReady polls until node name has condition Ready=True.
func waitNodeReady(ctx context.Context, client kubernetes.Interface, name string) (*corev1.Node, error) {
	var node *corev1.Node
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, simulatedNodeReadyTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				node = n
				return true, nil
			}
		}
		last = "no Ready=True condition yet"
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for Ready: %w (last: %s)", err, last)
	}
	return node, nil
}
