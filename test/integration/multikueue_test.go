package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"

	"github.com/example/platform-apiserver/test/framework"
)

// multiKueueTimeout bounds each step of Kueue's on a 2-core machine.
const multiKueueTimeout = 2 * time.Minute

// TestMultiKueueHarness proves the MultiKueue harness end to end: a
// manager (the full stack, mirroring both workers as members) and two bare
// workers (kwok nodes, kube-scheduler, the Job controller), each running
// Kueue. With Kueue's AllAtOnce dispatcher one Job is offered to both
// workers, runs on one, and the manager's Workload records which. Then the
// manager's Kueue restarts with an external dispatcher's name, and a second
// Job's Workload waits, quota reserved and offered to no worker, until the
// test does what that dispatcher will do: nominate one worker in
// status.nominatedClusterNames (framework.NominateWorkers).
//
// Not parallel: three stacks and three Kueues keep two cores busy, and the
// slow tier's tests that bound times run after it.
func TestMultiKueueHarness(t *testing.T) {
	ctx := t.Context()
	const ns = "team-a"
	members := t.TempDir()
	workers := map[string]framework.MultiKueueWorker{}
	for _, name := range []string{"worker-1", "worker-2"} {
		workers[name] = startWorker(t, name, members)
	}
	manager := framework.ForTest(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		ExtraPlatformArgs: []string{"--cluster-id=manager", "--kubeconfig=kubeconfig", "--discovery-batch-delay=50ms",
			"--member-kubeconfig-dir=" + members, "--member-kubeconfig-dir-interval=300ms"},
	})
	managerKueue, err := manager.StartKueue(ctx, framework.KueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("manager's Kueue log: %s", managerKueue.LogPath())
	begin := time.Now()
	err = framework.ConnectMultiKueue(ctx, manager, workers, framework.MultiKueueOptions{
		Namespace:    ns,
		ManagerQuota: resources("4", "8Gi"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MultiKueue connected in %s", time.Since(begin).Round(time.Millisecond))
	mk := kueueclient.NewForConfigOrDie(manager.AdminConfig())
	managerKube := kubernetes.NewForConfigOrDie(manager.AdminConfig())
	remotes := watchRemoteWorkloads(t, workers, ns)

	// AllAtOnce: both workers get the Workload, the first to admit it wins.
	job1 := createJob(t, managerKube, ns, "job-1")
	wl1 := managerWorkload(t, mk, job1)
	waitWorkload(t, mk, ns, wl1, "QuotaReserved on the manager", func(wl *kueue.Workload) bool {
		return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	})
	eventually(t, "a remote Workload created on both workers", multiKueueTimeout, func(context.Context) (bool, string) {
		got := remotes.created(wl1)
		return len(got) == 2, fmt.Sprintf("created on %v", got)
	})
	admitted := waitWorkload(t, mk, ns, wl1, "Admitted on the manager with status.clusterName", func(wl *kueue.Workload) bool {
		return wl.Status.ClusterName != nil && meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
	})
	winner := *admitted.Status.ClusterName
	t.Logf("%s runs on %s", wl1, winner)
	waitRemoteAdmitted(t, workers[winner], ns, wl1)
	waitJobRunning(t, workers[winner], ns, job1.Name, winner+"-node")
	// The platform mirrors both workers as members.
	eventually(t, "both workers mirrored as Synced ClusterCapacities", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out, _, err := manager.Kubectl(ctx, "get", "clustercapacities", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.mirroring.state} {end}`)
		return err == nil && strings.Contains(out, "worker-1=Synced") && strings.Contains(out, "worker-2=Synced"), fmt.Sprint(out, err)
	})

	// An external dispatcher: nothing is dispatched until it nominates.
	const dispatcher = "platform.example.io/test-dispatcher"
	if err := managerKueue.Restart(ctx, framework.KueueOptions{DispatcherName: dispatcher}); err != nil {
		t.Fatal(err)
	}
	job2 := createJob(t, managerKube, ns, "job-2")
	wl2 := managerWorkload(t, mk, job2)
	waitWorkload(t, mk, ns, wl2, "QuotaReserved on the manager", func(wl *kueue.Workload) bool {
		return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	})
	const quiet = 10 * time.Second
	time.Sleep(quiet) // AllAtOnce dispatched within a second or two above
	if got := remotes.created(wl2); len(got) != 0 {
		t.Fatalf("with dispatcher %s and nothing nominated, remote Workloads were created on %v", dispatcher, got)
	}
	if wl, err := mk.KueueV1beta2().Workloads(ns).Get(ctx, wl2, metav1.GetOptions{}); err != nil || len(wl.Status.NominatedClusterNames) != 0 || wl.Status.ClusterName != nil {
		t.Fatalf("Workload %s before nomination: %v, %v", wl2, wl, err)
	}
	nominee := "worker-1"
	if winner == nominee {
		nominee = "worker-2"
	}
	// What the dispatcher will do (as Kueue's field manager: a plain merge
	// patch leaves the Workload unadmittable, see NominateWorkers).
	if err := framework.NominateWorkers(ctx, manager, ns, wl2, []string{nominee}); err != nil {
		t.Fatal(err)
	}
	waitRemoteAdmitted(t, workers[nominee], ns, wl2)
	admitted = waitWorkload(t, mk, ns, wl2, "Admitted on the manager with status.clusterName", func(wl *kueue.Workload) bool {
		return wl.Status.ClusterName != nil && meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
	})
	if got := *admitted.Status.ClusterName; got != nominee {
		t.Errorf("%s: status.clusterName = %s, want the nominee %s", wl2, got, nominee)
	}
	if got := remotes.created(wl2); !slices.Equal(got, []string{nominee}) {
		t.Errorf("%s: remote Workloads created on %v, want only on %s", wl2, got, nominee)
	}
	waitJobRunning(t, workers[nominee], ns, job2.Name, nominee+"-node")
}

// startWorker starts a bare cluster with one kwok node (<name>-node), the
// scheduler, the Job controller and Kueue, and lists its kubeconfig in
// members as member name.
func startWorker(t *testing.T, name, members string) framework.MultiKueueWorker {
	t.Helper()
	ctx := t.Context()
	cp := framework.ForTest(t, framework.Options{
		WithoutPlatform:        true,
		StartControllerManager: true,
		StartJobController:     true,
		StartScheduler:         true,
		StartSimulator:         true,
	})
	if _, err := cp.CreateSimulatedNode(ctx, framework.SimulatedNode{Name: name + "-node"}); err != nil {
		t.Fatal(err)
	}
	k, err := cp.StartKueue(ctx, framework.KueueOptions{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Logf("%s's Kueue log: %s", name, k.LogPath())
	copyFile(t, cp.AdminKubeconfig(), filepath.Join(members, name))
	return framework.MultiKueueWorker{Cluster: cp, Quota: resources("2", "4Gi")}
}

func resources(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

func createJob(t *testing.T, client kubernetes.Interface, ns, name string) *batchv1.Job {
	t.Helper()
	job := framework.MultiKueueJob(ns, name, "user-queue", resources("500m", "256Mi"))
	job, err := client.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Job %s: %v", name, err)
	}
	return job
}

// managerWorkload waits for the Workload Kueue creates for job and
// returns its name.
func managerWorkload(t *testing.T, client kueueclient.Interface, job *batchv1.Job) string {
	t.Helper()
	var name string
	eventually(t, "the Workload of Job "+job.Name, multiKueueTimeout, func(ctx context.Context) (bool, string) {
		list, err := client.KueueV1beta2().Workloads(job.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, wl := range list.Items {
			if slices.ContainsFunc(wl.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == job.UID }) {
				name = wl.Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Workloads, none owned by the Job", len(list.Items))
	})
	return name
}

// waitWorkload waits until Workload ns/name satisfies ok and returns it.
func waitWorkload(t *testing.T, client kueueclient.Interface, ns, name, what string, ok func(*kueue.Workload) bool) *kueue.Workload {
	t.Helper()
	var last *kueue.Workload
	eventually(t, name+": "+what, multiKueueTimeout, func(ctx context.Context) (bool, string) {
		wl, err := client.KueueV1beta2().Workloads(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		last = wl
		return ok(wl), fmt.Sprintf("clusterName %v, nominated %v, conditions %v, checks %v",
			wl.Status.ClusterName, wl.Status.NominatedClusterNames, wl.Status.Conditions, wl.Status.AdmissionChecks)
	})
	return last
}

// waitRemoteAdmitted waits until the worker's copy of Workload ns/name is
// Admitted by the worker's Kueue.
func waitRemoteAdmitted(t *testing.T, w framework.MultiKueueWorker, ns, name string) {
	t.Helper()
	client := kueueclient.NewForConfigOrDie(w.Cluster.AdminConfig())
	waitWorkload(t, client, ns, name, "Admitted on the worker", func(wl *kueue.Workload) bool {
		return meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
	})
}

// waitJobRunning waits until the worker runs Job ns/name, unsuspended, with
// its pod Running on node.
func waitJobRunning(t *testing.T, w framework.MultiKueueWorker, ns, name, node string) {
	t.Helper()
	client := kubernetes.NewForConfigOrDie(w.Cluster.AdminConfig())
	eventually(t, "Job "+name+" running on "+node, multiKueueTimeout, func(ctx context.Context) (bool, string) {
		job, err := client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if job.Spec.Suspend != nil && *job.Spec.Suspend {
			return false, "the remote Job is suspended"
		}
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node {
				return true, ""
			}
			seen = append(seen, p.Name+" "+string(p.Status.Phase)+" on "+p.Spec.NodeName)
		}
		return false, fmt.Sprintf("pods: %v", seen)
	})
}

// remoteWorkloads records on which workers each Workload name was created.
type remoteWorkloads struct {
	mu   sync.Mutex
	seen map[string][]string // Workload name → workers, in name order
}

// watchRemoteWorkloads starts an informer on every worker's Workloads in
// ns, stopped with the test, so a remote Workload that MultiKueue creates
// and soon deletes again (AllAtOnce's loser) is still seen.
func watchRemoteWorkloads(t *testing.T, workers map[string]framework.MultiKueueWorker, ns string) *remoteWorkloads {
	t.Helper()
	r := &remoteWorkloads{seen: map[string][]string{}}
	for _, name := range slices.Sorted(maps.Keys(workers)) {
		client := kueueclient.NewForConfigOrDie(workers[name].Cluster.AdminConfig())
		factory := kueueinformers.NewSharedInformerFactoryWithOptions(client, 0, kueueinformers.WithNamespace(ns))
		informer := factory.Kueue().V1beta2().Workloads().Informer()
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			if wl, ok := obj.(*kueue.Workload); ok {
				r.add(wl.Name, name)
			}
		}}); err != nil {
			t.Fatal(err)
		}
		factory.Start(t.Context().Done())
		if !cache.WaitForCacheSync(t.Context().Done(), informer.HasSynced) {
			t.Fatalf("%s: Workload informer did not sync", name)
		}
	}
	return r
}

func (r *remoteWorkloads) add(workload, worker string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.seen[workload], worker) {
		r.seen[workload] = append(r.seen[workload], worker)
		slices.Sort(r.seen[workload])
	}
}

// created returns the workers on which workload was created.
func (r *remoteWorkloads) created(workload string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen[workload])
}
