package bench

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"

	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

const (
	// nodeCount is how many objects each side serves.
	nodeCount = 5000
	// clusterID is the member cluster the registry's nodes belong to.
	clusterID = "bench"
	// podsPerNode pods bound to each registry node make its requests non-zero.
	podsPerNode = 4
	// namespaceCount namespaces hold those pods.
	namespaceCount = 20
	// getNodeIndex picks the node the get benchmarks fetch, mid-list.
	getNodeIndex = nodeCount / 2
	// seedWorkers bounds concurrent creates against kube-apiserver.
	seedWorkers = 32

	gi = int64(1) << 30
	mi = int64(1) << 20
)

// nodeName is the member node name of index i, the same on both sides.
func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// getNodeName and getNodeCapacityName are the objects the get benchmarks fetch.
var (
	getNodeName         = nodeName(getNodeIndex)
	getNodeCapacityName = nodecapacity.Name(clusterID, getNodeName)
)

// instanceType is one machine size of the simulated fleet.
type instanceType struct {
	name         string
	cpuMillis    int64
	memoryBytes  int64
	reservedCPU  int64 // system and kube reserved, as a kubelet subtracts them
	reservedMem  int64
	maxPods      int64
	ephemeralGiB int64
}

var instanceTypes = []instanceType{
	{name: "m6i.xlarge", cpuMillis: 4000, memoryBytes: 16 * gi, reservedCPU: 80, reservedMem: 1200 * mi, maxPods: 58, ephemeralGiB: 100},
	{name: "m6i.2xlarge", cpuMillis: 8000, memoryBytes: 32 * gi, reservedCPU: 90, reservedMem: 1800 * mi, maxPods: 58, ephemeralGiB: 100},
	{name: "m6i.4xlarge", cpuMillis: 16000, memoryBytes: 64 * gi, reservedCPU: 110, reservedMem: 2600 * mi, maxPods: 234, ephemeralGiB: 200},
}

// storeNode is node i as discovery records it: a mix of sizes and zones,
// every 20th node tainted for a dedicated pool, every 100th cordoned and
// every 500th NotReady. kubeNode derives the kube-apiserver Node from it, so
// both sides hold the same shapes.
func storeNode(i int, now time.Time) store.Node {
	it := instanceTypes[i%len(instanceTypes)]
	name := nodeName(i)
	created := now.Add(-time.Duration(24+i%240) * time.Hour)
	heartbeat := now.Add(-time.Duration(i%40) * time.Second)
	n := store.Node{
		Name:      name,
		UID:       fmt.Sprintf("6f1c2a4e-0000-4000-8000-%012d", i),
		CreatedAt: created,
		Labels: map[string]string{
			"kubernetes.io/hostname":           name,
			"kubernetes.io/os":                 "linux",
			"kubernetes.io/arch":               "amd64",
			"beta.kubernetes.io/os":            "linux",
			"beta.kubernetes.io/arch":          "amd64",
			"beta.kubernetes.io/instance-type": it.name,
			"node.kubernetes.io/instance-type": it.name,
			"topology.kubernetes.io/region":    "eu-west-1",
			"topology.kubernetes.io/zone":      fmt.Sprintf("eu-west-1%c", 'a'+i%3),
			"platform.example.io/pool":         "general",
		},
		Capacity:    store.Quantities{CPUMillis: it.cpuMillis, MemoryBytes: it.memoryBytes, Pods: it.maxPods},
		Allocatable: store.Quantities{CPUMillis: it.cpuMillis - it.reservedCPU, MemoryBytes: it.memoryBytes - it.reservedMem, Pods: it.maxPods},
		Ready:       true,
		Conditions: []store.NodeCondition{
			{Type: "MemoryPressure", Status: "False", Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available", LastTransitionTime: created},
			{Type: "DiskPressure", Status: "False", Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure", LastTransitionTime: created},
			{Type: "PIDPressure", Status: "False", Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available", LastTransitionTime: created},
			{Type: "Ready", Status: "True", Reason: "KubeletReady", Message: "kubelet is posting ready status", LastTransitionTime: created.Add(30 * time.Second)},
		},
	}
	if i%20 == 0 {
		n.Labels["platform.example.io/pool"] = "infra"
		n.Taints = append(n.Taints, store.Taint{Key: "dedicated", Value: "infra", Effect: "NoSchedule"})
	}
	if i%100 == 1 {
		n.Unschedulable = true
		n.Taints = append(n.Taints, store.Taint{Key: "node.kubernetes.io/unschedulable", Effect: "NoSchedule"})
	}
	if i%500 == 7 {
		n.Ready = false
		ready := &n.Conditions[3]
		ready.Status, ready.Reason, ready.Message = "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
		ready.LastTransitionTime = heartbeat
		n.Taints = append(n.Taints, store.Taint{Key: "node.kubernetes.io/unreachable", Effect: "NoExecute"})
	}
	return n
}

// kubeNode is n as a kubelet would have registered it, with the fields every
// real Node carries besides those the registry keeps (addresses, node info,
// pod CIDR, ephemeral storage). It carries no image list: real Nodes do,
// which makes them larger than these.
func kubeNode(i int, n store.Node, now time.Time) *corev1.Node {
	it := instanceTypes[i%len(instanceTypes)]
	resources := func(r store.Quantities, ephemeral int64) corev1.ResourceList {
		l := kubeResources(r)
		l[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(ephemeral, resource.BinarySI)
		l["hugepages-1Gi"], l["hugepages-2Mi"] = *resource.NewQuantity(0, resource.DecimalSI), *resource.NewQuantity(0, resource.DecimalSI)
		return l
	}
	heartbeat := metav1.NewTime(now.Add(-time.Duration(i%40) * time.Second))
	conditions := make([]corev1.NodeCondition, len(n.Conditions))
	for c, cond := range n.Conditions {
		conditions[c] = corev1.NodeCondition{
			Type: corev1.NodeConditionType(cond.Type), Status: corev1.ConditionStatus(cond.Status),
			Reason: cond.Reason, Message: cond.Message,
			LastHeartbeatTime: heartbeat, LastTransitionTime: metav1.NewTime(cond.LastTransitionTime),
		}
	}
	ip := fmt.Sprintf("10.%d.%d.%d", 20+i%3, i/250, 10+i%250)
	podCIDR := fmt.Sprintf("100.%d.%d.0/24", 64+i/256, i%256)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   n.Name,
			Labels: n.Labels,
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{
			PodCIDR:       podCIDR,
			PodCIDRs:      []string{podCIDR},
			ProviderID:    fmt.Sprintf("aws:///eu-west-1%c/i-0%016x", 'a'+i%3, i),
			Unschedulable: n.Unschedulable,
			Taints:        kubeTaints(n.Taints),
		},
		Status: corev1.NodeStatus{
			Capacity:    resources(n.Capacity, it.ephemeralGiB*gi),
			Allocatable: resources(n.Allocatable, it.ephemeralGiB*gi*9/10),
			Conditions:  conditions,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: ip},
				{Type: corev1.NodeHostName, Address: n.Name},
				{Type: corev1.NodeInternalDNS, Address: n.Name + ".eu-west-1.compute.internal"},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               fmt.Sprintf("ec2%029x", i),
				SystemUUID:              fmt.Sprintf("ec2%05x-0000-0000-0000-%012x", i, i),
				BootID:                  fmt.Sprintf("%08x-1111-4222-8333-%012x", i, i),
				KernelVersion:           "6.8.0-1021-aws",
				OSImage:                 "Ubuntu 24.04.2 LTS",
				ContainerRuntimeVersion: "containerd://2.1.3",
				KubeletVersion:          "v1.37.2",
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
}

// kubeResources is r as a Node's resource list.
func kubeResources(r store.Quantities) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(r.CPUMillis, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(r.MemoryBytes, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(r.Pods, resource.DecimalSI),
	}
}

func kubeTaints(ts []store.Taint) []corev1.Taint {
	out := make([]corev1.Taint, len(ts))
	for i, t := range ts {
		out[i] = corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)}
	}
	return out
}

// registryBatch is the registry's side: every node, podsPerNode pods bound to
// each (so requested is non-zero) spread over namespaceCount namespaces.
func registryBatch(now time.Time) store.Batch {
	b := store.Batch{ClusterID: clusterID}
	namespaces := make([]string, namespaceCount)
	for n := range namespaces {
		namespaces[n] = fmt.Sprintf("team-%02d", n)
		b.Namespaces = append(b.Namespaces, store.Namespace{
			Name: namespaces[n], UID: fmt.Sprintf("ns-%02d", n), Phase: "Active", CreatedAt: now.Add(-90 * 24 * time.Hour),
			Labels: map[string]string{"kubernetes.io/metadata.name": namespaces[n]},
		})
	}
	for i := range nodeCount {
		n := storeNode(i, now)
		b.Nodes = append(b.Nodes, n)
		for p := range podsPerNode {
			b.Pods = append(b.Pods, store.Pod{
				Namespace:          namespaces[(i+p)%namespaceCount],
				Name:               fmt.Sprintf("app-%05d-%d", i, p),
				UID:                fmt.Sprintf("pod-%05d-%d", i, p),
				NodeName:           n.Name,
				Phase:              "Running",
				CPURequestMillis:   int64(100 + 150*((i+p)%4)),
				MemoryRequestBytes: int64(128+256*((i+p)%4)) * mi,
			})
		}
	}
	return b
}

// seed writes nodeCount Nodes into kube-apiserver and nodeCount nodes (with
// pods and one metrics sample each) into the registry, then waits until both
// lists serve all of them.
func (e *env) seed(ctx context.Context) error {
	e.seededAt = time.Now().UTC().Truncate(time.Second)
	if err := e.createKubeNodes(ctx, e.seededAt); err != nil {
		return err
	}
	if err := seedRegistry(ctx, e.registry, e.seededAt); err != nil {
		return err
	}
	return e.waitSeeded(ctx)
}

// createKubeNodes creates the Nodes with seedWorkers concurrent requests.
// kube-apiserver's TaintNodesByCondition admission adds a not-ready taint to
// every new Node, which the node lifecycle controller would remove once the
// kubelet reports Ready; with no controller here, each Node is updated once to
// carry exactly its intended taints.
func (e *env) createKubeNodes(ctx context.Context, now time.Time) error {
	nodes := e.kube.CoreV1().Nodes()
	return parallel(ctx, seedWorkers, nodeCount, func(ctx context.Context, i int) error {
		want := kubeNode(i, storeNode(i, now), now)
		created, err := nodes.Create(ctx, want, metav1.CreateOptions{})
		if err != nil || len(created.Spec.Taints) == len(want.Spec.Taints) {
			return err
		}
		created.Spec.Taints = want.Spec.Taints
		_, err = nodes.Update(ctx, created, metav1.UpdateOptions{})
		return err
	})
}

// seedRegistry writes the registry's side through the store, the path
// discovery takes: one batch, then one metrics sample per node.
func seedRegistry(ctx context.Context, reg *postgres.Store, now time.Time) error {
	// The platform-apiserver migrates at start; this waits for (or does) it.
	if err := reg.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate registry: %w", err)
	}
	if err := reg.Apply(ctx, registryBatch(now)); err != nil {
		return fmt.Errorf("apply registry batch: %w", err)
	}
	samples := make([]store.NodeMetricsSample, nodeCount)
	for i := range samples {
		n := storeNode(i, now)
		samples[i] = store.NodeMetricsSample{
			ClusterID: clusterID, Node: n.Name,
			CPUNanoCores: n.Allocatable.CPUMillis * int64(20+i%50) / 100 * 1_000_000,
			MemoryBytes:  n.Allocatable.MemoryBytes * int64(30+i%40) / 100,
			ObservedAt:   now.Add(-15 * time.Second), Window: 20 * time.Second,
		}
	}
	recorded, err := reg.RecordNodeMetrics(ctx, store.Fence{ClusterID: clusterID}, samples, store.UsageReporting{Threshold: 0.05, Period: 5 * time.Minute})
	if err != nil {
		return fmt.Errorf("record node metrics: %w", err)
	}
	if recorded.Stored != nodeCount || recorded.Reported != nodeCount {
		return fmt.Errorf("stored %d and reported %d metrics samples, want %d each", recorded.Stored, recorded.Reported, nodeCount)
	}
	return nil
}

// waitSeeded polls until kube-apiserver lists every Node and the aggregated
// API lists every NodeCapacity, and checks that the fetched NodeCapacity
// carries requests and usage, so the benchmarks measure complete objects.
func (e *env) waitSeeded(ctx context.Context) error {
	err := pollUntil(ctx, time.Second, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		nodes, err := e.listNodes(ctx)
		if err != nil {
			return false, fmt.Sprintf("list Nodes: %v", err), nil
		}
		ncs, err := listNodeCapacities(e.platform)(ctx)
		if err != nil {
			return false, fmt.Sprintf("list NodeCapacities: %v", err), nil
		}
		return nodes == nodeCount && ncs == nodeCount, fmt.Sprintf("%d Nodes and %d NodeCapacities, want %d of each", nodes, ncs, nodeCount), nil
	})
	if err != nil {
		return fmt.Errorf("wait for both sides to serve %d objects: %w", nodeCount, err)
	}

	node, err := e.kube.CoreV1().Nodes().Get(ctx, getNodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get Node %s: %w", getNodeName, err)
	}
	nc, err := e.platform.PlatformV1alpha1().NodeCapacities().Get(ctx, getNodeCapacityName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get NodeCapacity %s: %w", getNodeCapacityName, err)
	}
	if nc.Status.Requested.CPU.IsZero() || nc.Status.Requested.Pods != podsPerNode || nc.Status.Usage == nil {
		return fmt.Errorf("NodeCapacity %s lacks requests or usage: requested %+v, usage %v", nc.Name, nc.Status.Requested, nc.Status.Usage)
	}
	if node.Status.Allocatable.Cpu().IsZero() || len(node.Spec.Taints) != len(storeNode(getNodeIndex, time.Now()).Taints) {
		return fmt.Errorf("node %s lacks its status or has unexpected taints %v", node.Name, node.Spec.Taints)
	}
	return nil
}

// inOrder runs steps until one fails.
func inOrder(ctx context.Context, steps ...func(context.Context) error) error {
	for _, s := range steps {
		if err := s(ctx); err != nil {
			return err
		}
	}
	return nil
}

// createNamespaces and createPods create syncNamespace(0..n-1) and
// syncPod(0..n-1) over the first nodes nodes.
func (e *env) createNamespaces(n int) func(context.Context) error {
	return func(ctx context.Context) error {
		return parallel(ctx, seedWorkers, n, func(ctx context.Context, i int) error {
			_, err := e.kube.CoreV1().Namespaces().Create(ctx, syncNamespace(i), metav1.CreateOptions{})
			return err
		})
	}
}

func (e *env) createPods(n, nodes int) func(context.Context) error {
	return func(ctx context.Context) error {
		return parallel(ctx, seedWorkers, n, func(ctx context.Context, j int) error {
			p := syncPod(j, nodes)
			_, err := e.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
	}
}

// parallel runs f for 0..n-1, workers at a time, and returns the first
// error (those not started by then are not).
func parallel(ctx context.Context, workers, n int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	workqueue.ParallelizeUntil(ctx, workers, n, func(i int) {
		if err := f(ctx, i); err != nil {
			cancel(fmt.Errorf("object %d: %w", i, err))
		}
	})
	return context.Cause(ctx)
}

// relabel sets label key to value on the kube-apiserver object name of
// resource (nodes, namespaces).
func (e *env) relabel(ctx context.Context, resource, name, key, value string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	err := e.kube.CoreV1().RESTClient().Patch(types.MergePatchType).Resource(resource).Name(name).Body([]byte(patch)).Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("label %s %s: %w", resource, name, err)
	}
	return nil
}

func syncNamespaceName(i int) string { return fmt.Sprintf("ns-%05d", i) }

// syncNamespace is namespace i: a team's, with the labels platforms put on
// namespaces.
func syncNamespace(i int) *corev1.Namespace {
	envs := []string{"prod", "staging", "dev"}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: syncNamespaceName(i),
		Labels: map[string]string{
			"platform.example.io/team":        fmt.Sprintf("team-%03d", i%200),
			"platform.example.io/environment": envs[i%len(envs)],
			"platform.example.io/cost-center": fmt.Sprintf("cc-%04d", i%50),
		},
		Annotations: map[string]string{"platform.example.io/owner": fmt.Sprintf("team-%03d@example.io", i%200)},
	}}
}

// syncPod is pod j, bound to node j%nodes in namespace
// j/podsPerSyncNamespace, shaped like a Deployment's pod: owner reference,
// template hash, an app container and a sidecar, both with requests and
// limits, probes and ports. It is created with spec.nodeName, so it counts
// as scheduled; with no kubelet it stays Pending, which is not terminal.
func syncPod(j, nodes int) *corev1.Pod {
	q := resource.MustParse
	app := fmt.Sprintf("app-%d", j/podsPerSyncNamespace%40)
	hash := fmt.Sprintf("%010x", j/podsPerSyncNamespace)
	cpu := []string{"100m", "250m", "500m", "50m"}[j%4]
	mem := []string{"128Mi", "256Mi", "512Mi", "1Gi"}[j%4]
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: syncNamespaceName(j / podsPerSyncNamespace),
			Name:      fmt.Sprintf("%s-%s-%05d", app, hash[:6], j),
			Labels:    map[string]string{"app.kubernetes.io/name": app, "pod-template-hash": hash},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-" + hash[:6],
				UID:        types.UID(fmt.Sprintf("6f1c2a4e-1111-4000-8000-%012d", j/podsPerSyncNamespace)),
				Controller: new(true), BlockOwnerDeletion: new(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName: nodeName(j % nodes),
			Containers: []corev1.Container{
				{
					Name:  "app",
					Image: "registry.example.io/" + app + ":1.4.2",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Env:   []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "PORT", Value: "8080"}},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: q(cpu), corev1.ResourceMemory: q(mem)},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: q(mem)},
					},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")},
					}},
				},
				{
					Name:  "proxy",
					Image: "registry.example.io/proxy:2.0.1",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: q("10m"), corev1.ResourceMemory: q("32Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: q("64Mi")},
					},
				},
			},
		},
	}
}

// registryCounts is how many namespaces, nodes and pods a side holds.
type registryCounts struct{ namespaces, nodes, pods int64 }

func (c registryCounts) String() string {
	return fmt.Sprintf("%d namespaces, %d nodes, %d pods", c.namespaces, c.nodes, c.pods)
}

func (c registryCounts) total() int64 { return c.namespaces + c.nodes + c.pods }

// memberCounts counts kube-apiserver's Namespaces, Nodes and Pods. Pods
// that are terminal would not be mirrored; none of the seeded ones are.
func (e *env) memberCounts(ctx context.Context) (registryCounts, error) {
	var c registryCounts
	for resource, n := range map[string]*int64{"namespaces": &c.namespaces, "nodes": &c.nodes, "pods": &c.pods} {
		if err := e.eachPage(ctx, resource, func(page runtime.Object) { *n += int64(meta.LenList(page)) }); err != nil {
			return c, fmt.Errorf("count kube-apiserver objects: %w", err)
		}
	}
	return c, nil
}

// eachPage hands each page of kube-apiserver's list of resource (in every
// namespace), 1,000 items at most, to f.
func (e *env) eachPage(ctx context.Context, resource string, f func(runtime.Object)) error {
	opts := metav1.ListOptions{Limit: 1000}
	for {
		page, err := e.kube.CoreV1().RESTClient().Get().Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).Do(ctx).Get()
		if err != nil {
			return err
		}
		f(page)
		if opts.Continue, err = meta.NewAccessor().Continue(page); err != nil || opts.Continue == "" {
			return err
		}
	}
}
