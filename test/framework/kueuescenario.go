package framework

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// GPUResource is the extended resource of the scenario's GPU nodes.
const GPUResource = corev1.ResourceName("nvidia.com/gpu")

// KueueJobShape is a kind of Job of the dispatch scenario's batches.
type KueueJobShape struct {
	Name     string
	Jobs     int
	Pods     int32
	CPU, Mem string
	GPUs     int64
	// LargeOnly: no node of the small worker can take its pod.
	LargeOnly bool
}

// MixedJobShapes are the dispatch scenario's batch: 20 Jobs, those only
// the large worker can take first (a 5-CPU pod: the small worker's nodes
// have 4; a GPU), then CPU-heavy pairs and tiny ones: 40 of the two
// workers' 64 CPUs.
var MixedJobShapes = []KueueJobShape{
	{Name: "big", Jobs: 3, Pods: 1, CPU: "5", Mem: "4Gi", LargeOnly: true},
	{Name: "gpu", Jobs: 3, Pods: 1, CPU: "1", Mem: "1Gi", GPUs: 1, LargeOnly: true},
	{Name: "heavy", Jobs: 6, Pods: 2, CPU: "1500m", Mem: "2Gi"},
	{Name: "tiny", Jobs: 8, Pods: 1, CPU: "500m", Mem: "512Mi"},
}

// Job is a MultiKueue Job of the shape in the scenario's LocalQueue.
func (s KueueJobShape) Job(namespace, name string) *batchv1.Job {
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s.CPU), corev1.ResourceMemory: resource.MustParse(s.Mem)}
	if s.GPUs > 0 {
		requests[GPUResource] = *resource.NewQuantity(s.GPUs, resource.DecimalSI)
	}
	j := MultiKueueJob(namespace, name, "user-queue", requests)
	j.Spec.Parallelism, j.Spec.Completions = new(s.Pods), new(s.Pods)
	return j
}

// MixedJobs makes every MixedJobShapes Job, named prefix-shape-i, in
// batch order, with each one's shape by name.
func MixedJobs(namespace, prefix string) ([]*batchv1.Job, map[string]KueueJobShape) {
	var jobs []*batchv1.Job
	shapes := map[string]KueueJobShape{}
	for _, s := range MixedJobShapes {
		for i := range s.Jobs {
			name := fmt.Sprintf("%s-%s-%d", prefix, s.Name, i)
			jobs = append(jobs, s.Job(namespace, name))
			shapes[name] = s
		}
	}
	return jobs, shapes
}

// SmallMember is the registry member of the scenario's small worker,
// whose MultiKueueCluster is "small" (mapped by label); the large
// worker's MultiKueueCluster and member are both "large".
const SmallMember = "worker-small"

// TwoWorkerKueueFleet is the dispatch scenario's fleet: small (four
// 4-CPU nodes) and large (three 16-CPU nodes, two with 2 GPUs each), whose
// ClusterQueues admit far more than their nodes hold, so a worker's Kueue
// admits what its nodes cannot run, as quota and capacity differ in real
// clusters. The manager's Kueue uses dispatcherName.
func TwoWorkerKueueFleet(dispatcherName string) KueueFleetOptions {
	node := func(name, cpu, mem string, gpus int64) SimulatedNode {
		c := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")}
		if gpus > 0 {
			c[GPUResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
		}
		return SimulatedNode{Name: name, Capacity: c}
	}
	quota := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("4Ti"), GPUResource: resource.MustParse("100")}
	return KueueFleetOptions{
		Workers: map[string]KueueFleetWorker{
			"small": {Quota: quota, Labels: map[string]string{"platform.example.io/member": SmallMember},
				Nodes: []SimulatedNode{node("s1", "4", "16Gi", 0), node("s2", "4", "16Gi", 0), node("s3", "4", "16Gi", 0), node("s4", "4", "16Gi", 0)}},
			"large": {Quota: quota,
				Nodes: []SimulatedNode{node("l1", "16", "64Gi", 2), node("l2", "16", "64Gi", 2), node("l3", "16", "64Gi", 0)}},
		},
		ManagerQuota:   quota,
		DispatcherName: dispatcherName,
	}
}
