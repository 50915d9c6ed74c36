package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/workqueue"
)

// seedWorkers bounds concurrent creates against kube-apiserver.
const seedWorkers = 32

// seedStep is one step of seeding a member: n objects made by run.
type seedStep struct {
	what string
	n    int
	run  func(context.Context) error
}

// runSteps runs the steps in order, logging each one's rate under prefix.
func runSteps(ctx context.Context, prefix string, steps ...seedStep) error {
	for _, s := range steps {
		begin := time.Now()
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		took := time.Since(begin)
		fmt.Fprintf(os.Stderr, "%s: %d %s in %s (%.0f/s)\n", prefix, s.n, s.what, took.Round(time.Millisecond), float64(s.n)/took.Seconds())
	}
	return nil
}

// namespacesStep and podsStep create syncNamespace(0..n-1) and syncPod(0..n-1).
func (e *env) namespacesStep(n int) seedStep {
	return seedStep{"Namespaces", n, func(ctx context.Context) error {
		return parallelCreate(ctx, n, func(ctx context.Context, i int) error {
			_, err := e.kube.CoreV1().Namespaces().Create(ctx, syncNamespace(i), metav1.CreateOptions{})
			return err
		})
	}}
}

func (e *env) podsStep(n int) seedStep {
	return seedStep{"Pods", n, func(ctx context.Context) error {
		return parallelCreate(ctx, n, func(ctx context.Context, j int) error {
			p := syncPod(j)
			_, err := e.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
	}}
}

// parallelCreate runs create for 0..n-1 with seedWorkers at a time and
// returns the first error.
func parallelCreate(ctx context.Context, n int, create func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	workqueue.ParallelizeUntil(ctx, seedWorkers, n, func(i int) {
		if err := create(ctx, i); err != nil {
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

// syncPod is pod j, bound to node j%nodeCount in namespace
// j/podsPerSyncNamespace, shaped like a Deployment's pod: owner reference,
// template hash, an app container and a sidecar, both with requests and
// limits, probes and ports. It is created with spec.nodeName, so it counts
// as scheduled; with no kubelet it stays Pending, which is not terminal.
func syncPod(j int) *corev1.Pod {
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
			NodeName: nodeName(j % nodeCount),
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
func (d *env) memberCounts(ctx context.Context) (registryCounts, error) {
	var c registryCounts
	var err error
	if c.namespaces, err = countPages(ctx, func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
		return d.kube.CoreV1().Namespaces().List(ctx, o)
	}); err != nil {
		return c, fmt.Errorf("count Namespaces: %w", err)
	}
	if c.nodes, err = countPages(ctx, func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
		return d.kube.CoreV1().Nodes().List(ctx, o)
	}); err != nil {
		return c, fmt.Errorf("count Nodes: %w", err)
	}
	if c.pods, err = countPages(ctx, func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
		return d.kube.CoreV1().Pods("").List(ctx, o)
	}); err != nil {
		return c, fmt.Errorf("count Pods: %w", err)
	}
	return c, nil
}

// countPages counts a list's items by paging through it with metadata
// only kept: the length of each page.
func countPages(ctx context.Context, list func(context.Context, metav1.ListOptions) (metav1.ListInterface, error)) (int64, error) {
	var n int64
	opts := metav1.ListOptions{Limit: 1000}
	for {
		page, err := list(ctx, opts)
		if err != nil {
			return 0, err
		}
		n += int64(itemCount(page))
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			return n, nil
		}
	}
}

func itemCount(l metav1.ListInterface) int {
	switch l := l.(type) {
	case *corev1.NamespaceList:
		return len(l.Items)
	case *corev1.NodeList:
		return len(l.Items)
	case *corev1.PodList:
		return len(l.Items)
	}
	return 0
}
