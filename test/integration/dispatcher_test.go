package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	apimeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclientset "sigs.k8s.io/kueue/client-go/clientset/versioned"

	platform "github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/dispatcher"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/test/framework"
)

const (
	dispatcherName = "platform.example.io/kueue-dispatcher"
	dispatcherSA   = "system:serviceaccount:platform-system:platform-kueue-dispatcher"
)

type kueueClient = kueueclientset.Interface

// kueueFleet is the dispatch scenario's fleet (framework.TwoWorkerKueueFleet)
// for t.
func kueueFleet(t *testing.T) *framework.KueueFleet {
	opts := framework.TwoWorkerKueueFleet(dispatcherName)
	opts.PlatformAPIServerBinary = os.Getenv("PLATFORM_APISERVER_BINARY")
	return framework.KueueFleetForTest(t, opts)
}

// TestKueueDispatcher runs the dispatcher against the real Kueue v0.17.0:
// a manager and two worker clusters (kwok nodes, kube-scheduler, the job
// controller, each its own Kueue), the workers mirrored by the manager's
// platform-apiserver as members, the dispatcher as its ServiceAccount with
// the shipped ClusterRole (docs/dispatcher.md).
//
//   - A batch of 20 Jobs of mixed shapes: each is dispatched to exactly one
//     worker (one remote Workload per Job), at least 95 % are admitted by
//     the first worker nominated, and every pod of every Job is bound to a
//     node of its worker: none was sent where it cannot fit (the 5-CPU and
//     GPU Jobs to the large worker only).
//   - A Job with required pod anti-affinity is nominated by the unmodelled
//     fallback, and says so in its condition.
//   - The large worker's API taken from the registry alone (a relay
//     between them stopped): its mirror is stale, Kueue still reaches it,
//     and Jobs that fit both go to the small one.
//   - The platform API down: nothing is nominated and the condition says
//     RegistryUnavailable; back, the Job is nominated.
//   - The dispatcher without its permissions exits naming them.
//   - The dispatcher killed (SIGKILL) while a batch is being decided and
//     started again: every Job is still nominated once, to one worker.
//   - A nominee whose queue does not admit: after the nomination timeout
//     the next best worker is nominated.
//   - Side by side: Kueue's AllAtOnce on the same fleet and batch creates a
//     remote Workload per Job per worker.
func TestKueueDispatcher(t *testing.T) {
	f := kueueFleet(t)
	ctx := t.Context()
	ns := f.Namespace
	kc, err := f.Manager.KueueClient()
	if err != nil {
		t.Fatal(err)
	}
	platformClient := versioned.NewForConfigOrDie(f.Manager.AdminConfig())
	waitWorkersSynced(t, platformClient)

	t.Run("without its permissions it exits naming them", func(t *testing.T) {
		_, kubeconfig, err := f.Manager.UserConfig("nobody")
		if err != nil {
			t.Fatal(err)
		}
		bin, err := f.DispatcherBinary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		out, err := exec.CommandContext(cctx, bin, "--kubeconfig="+kubeconfig, "--bind-address=").CombinedOutput()
		if err == nil {
			t.Fatalf("the dispatcher without permissions ran: %s", out)
		}
		for _, want := range []string{"create placementreports.platform.example.io", "patch workloads/status.kueue.x-k8s.io", "list workloads.kueue.x-k8s.io", "platform-kueue-dispatcher ClusterRole"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("its error does not name %q:\n%s", want, out)
			}
		}
	})

	// The dispatcher runs as its ServiceAccount, bound to the shipped role.
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) {
		if out, stderr, err := f.Manager.Kubectl(ctx, args...); err != nil {
			t.Fatalf("kubectl %v: %v\n%s%s", args, err, out, stderr)
		}
	}
	if _, err := kubernetes.NewForConfigOrDie(f.Manager.AdminConfig()).CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: apimeta.ObjectMeta{Name: "platform-system"}}, apimeta.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kubectl("apply", "-f", filepath.Join(root, "artifacts/kustomize/components/kueue-dispatcher/rbac.yaml"))
	_, saKubeconfig, err := f.Manager.UserConfig(dispatcherSA, "system:serviceaccounts", "system:serviceaccounts:platform-system")
	if err != nil {
		t.Fatal(err)
	}
	dispatcherArgs := []string{"--nomination-timeout=45s", "--settle=10s", "--retry-interval=2s"}
	if err := f.StartDispatcher(ctx, saKubeconfig, dispatcherArgs...); err != nil {
		t.Fatal(err)
	}

	jobs, shapes := framework.MixedJobs(ns, "d")
	out, err := f.RunBatch(ctx, jobs, 4*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	logBatch(t, "dispatcher", out)
	firstTime, perWorker := 0, map[string]int{}
	for name, o := range out {
		total := 0
		for _, n := range o.Remote {
			total += n
		}
		if total != 1 || o.Remote[o.Cluster] != 1 {
			t.Errorf("%s: remote Workloads %v, want one, on %s (nominated %v)", name, o.Remote, o.Cluster, o.Nominations)
		}
		if len(o.Nominations) > 0 && len(o.Nominations[0]) == 1 && o.Nominations[0][0] == o.Cluster {
			firstTime++
		}
		if shapes[name].LargeOnly && o.Cluster != "large" {
			t.Errorf("%s (%s) was admitted by %s, whose nodes cannot run it", name, shapes[name].Name, o.Cluster)
		}
		perWorker[o.Cluster]++
	}
	if t.Failed() {
		out, _, _ := f.Manager.Kubectl(ctx, "get", "workloads", "-n", ns, "-o", "yaml", "--show-managed-fields")
		t.Logf("the manager's Workloads:\n%s", out[:min(len(out), 12000)])
	}
	if firstTime*100 < 95*len(jobs) {
		t.Errorf("%d of %d Jobs admitted by the first worker nominated, want at least 95 %%", firstTime, len(jobs))
	}
	t.Logf("dispatcher: %d of %d admitted by the first nominee; Jobs per worker %v", firstTime, len(jobs), perWorker)
	assertPodsBound(ctx, t, f, jobs, out)
	assertCondition(ctx, t, kc, ns, jobs[0].Name, apimeta.ConditionTrue, dispatcher.ReasonFits, "nominated large")
	metrics, err := f.DispatcherMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, `platform_dispatcher_nominations_total{reason="Fits"} 20`) {
		t.Errorf("the nominations metric does not count 20 Fits:\n%s", grepLines(metrics, "platform_dispatcher_"))
	}

	t.Run("unmodelled pod sets go by the fallback", func(t *testing.T) {
		j := framework.MixedJobShapes[3].Job(ns, "unmodelled")
		j.Spec.Template.Labels = map[string]string{"app": "spread"}
		j.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: "kubernetes.io/hostname", LabelSelector: &apimeta.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}}}
		o, err := f.RunBatch(ctx, []*batchv1.Job{j}, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if n := o["unmodelled"].Nominations; len(n) == 0 || len(n[0]) != 2 {
			t.Errorf("nominations %v, want both current workers at once", n)
		}
		assertCondition(ctx, t, kc, ns, "unmodelled", apimeta.ConditionTrue, dispatcher.ReasonUnmodelled, "required pod affinity or anti-affinity")
	})

	t.Run("a stale member is not nominated while another fits", func(t *testing.T) {
		f.CutMember("large")
		restored := false
		restore := func() {
			if !restored {
				restored = true
				if err := f.RestoreMember(ctx, "large"); err != nil {
					t.Error(err)
				}
			}
		}
		defer restore()
		eventually(t, "the large worker's mirror judged stale", 90*time.Second, func(ctx context.Context) (bool, string) {
			r, err := platformClient.PlatformV1alpha1().PlacementReports().Create(ctx, &platform.PlacementReport{Spec: platform.PlacementReportSpec{
				Requests: map[string]resource.Quantity{"cpu": resource.MustParse("500m")}, Clusters: []string{"large"}}}, apimeta.CreateOptions{})
			if err != nil {
				return false, err.Error()
			}
			return len(r.Status.Clusters) == 1 && r.Status.Clusters[0].Stale, fmt.Sprintf("%+v", r.Status.Clusters)
		})
		var stale []*batchv1.Job
		for i := range 4 {
			stale = append(stale, framework.MixedJobShapes[3].Job(ns, fmt.Sprintf("stale-%d", i)))
		}
		o, err := f.RunBatch(ctx, stale, 2*time.Minute)
		restore()
		if err != nil {
			t.Fatal(err)
		}
		for name, jo := range o {
			if jo.Cluster != "small" || len(jo.Nominations) != 1 || !slices.Equal(jo.Nominations[0], []string{"small"}) {
				t.Errorf("%s: nominated %v, admitted by %s; want small only", name, jo.Nominations, jo.Cluster)
			}
		}
		// Nominated for its fit, the large worker ranked after it as stale
		// (Kueue still reaches it: it was not left out as inactive).
		assertCondition(ctx, t, kc, ns, "stale-0", apimeta.ConditionTrue, dispatcher.ReasonFits, "old")
	})

	t.Run("the platform API down: no nomination, a condition, then nominated", func(t *testing.T) {
		if err := f.Manager.StopPlatformAPIServer(); err != nil {
			t.Fatal(err)
		}
		kube := kubernetes.NewForConfigOrDie(f.Manager.AdminConfig())
		if _, err := kube.BatchV1().Jobs(ns).Create(ctx, framework.MixedJobShapes[3].Job(ns, "outage"), apimeta.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the condition says RegistryUnavailable", time.Minute, func(ctx context.Context) (bool, string) {
			wl := workloadOfJob(ctx, t, kc, ns, "outage")
			if wl == nil {
				return false, "no Workload yet"
			}
			c := findCondition(wl, dispatcher.ConditionType)
			return c != nil && c.Reason == dispatcher.ReasonRegistryUnavailable && len(wl.Status.NominatedClusterNames) == 0 && wl.Status.ClusterName == nil,
				fmt.Sprintf("%+v nominated %v", c, wl.Status.NominatedClusterNames)
		})
		if err := f.Manager.StartPlatformAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, "nominated and admitted once the platform API is back", 2*time.Minute, func(ctx context.Context) (bool, string) {
			wl := workloadOfJob(ctx, t, kc, ns, "outage")
			c := findCondition(wl, dispatcher.ConditionType)
			return wl.Status.ClusterName != nil && c != nil && c.Reason == dispatcher.ReasonFits, fmt.Sprintf("%+v", c)
		})
	})

	t.Run("the dispatcher crashes mid-batch and restarts", func(t *testing.T) {
		// On empty workers whose mirrors are Synced again (the registry
		// restarted just before): what is checked is the crash, not how
		// promises pack into nodes near full (docs/dispatcher.md).
		if err := f.DeleteJobs(ctx, 3*time.Minute); err != nil {
			t.Fatal(err)
		}
		waitWorkersSynced(t, platformClient)
		var jobs []*batchv1.Job
		for i := range 10 {
			jobs = append(jobs, framework.MixedJobShapes[2+i%2].Job(ns, fmt.Sprintf("crash-%d", i)))
		}
		type result struct {
			out framework.Batch
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := f.RunBatch(ctx, jobs, 3*time.Minute)
			done <- result{out, err}
		}()
		// Killed once the first of them is nominated, the others being
		// decided meanwhile.
		eventually(t, "a crash-batch Job nominated", time.Minute, func(ctx context.Context) (bool, string) {
			for _, j := range jobs {
				if wl := workloadOfJob(ctx, t, kc, ns, j.Name); wl != nil && len(wl.Status.NominatedClusterNames)+len(ptr.Deref(wl.Status.ClusterName, "")) > 0 {
					return true, ""
				}
			}
			return false, "none yet"
		})
		if err := f.KillDispatcher(); err != nil {
			t.Fatal(err)
		}
		if err := f.StartDispatcher(ctx, saKubeconfig, dispatcherArgs...); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		for name, o := range r.out {
			total := 0
			for _, n := range o.Remote {
				total += n
			}
			if total != 1 || len(o.Nominations) != 1 || len(o.Nominations[0]) != 1 {
				t.Errorf("%s: nominated %v, remote Workloads %v; want one nomination, one remote Workload", name, o.Nominations, o.Remote)
			}
		}
		assertPodsBound(ctx, t, f, jobs, r.out)
	})

	t.Run("the nominee does not admit: the next best is nominated", func(t *testing.T) {
		// The small worker's queue admits no CPU any more, and the large
		// worker's mirror is stale, so small is nominated first and never
		// admits; after the nomination timeout the large one is. On empty
		// workers, so that both have room for the Job.
		if err := f.DeleteJobs(ctx, 3*time.Minute); err != nil {
			t.Fatal(err)
		}
		waitWorkersSynced(t, platformClient)
		setSmallCPUQuota := func(q string) {
			t.Helper()
			wk, err := f.Workers["small"].KueueClient()
			if err != nil {
				t.Fatal(err)
			}
			cq, err := wk.KueueV1beta2().ClusterQueues().Get(ctx, "cluster-queue", apimeta.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
				if r.Name == corev1.ResourceCPU {
					cq.Spec.ResourceGroups[0].Flavors[0].Resources[i].NominalQuota = resource.MustParse(q)
				}
			}
			if _, err := wk.KueueV1beta2().ClusterQueues().Update(ctx, cq, apimeta.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		setSmallCPUQuota("0")
		defer setSmallCPUQuota("1000")
		f.CutMember("large")
		defer func() {
			if err := f.RestoreMember(ctx, "large"); err != nil {
				t.Error(err)
			}
		}()
		eventually(t, "the large worker's mirror stale", time.Minute, func(ctx context.Context) (bool, string) {
			cc, err := platformClient.PlatformV1alpha1().ClusterCapacities().Get(ctx, "large", apimeta.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return cc.Status.Mirroring.State != platform.MirroringSynced, string(cc.Status.Mirroring.State)
		})
		if err := f.StopDispatcher(); err != nil {
			t.Fatal(err)
		}
		if err := f.StartDispatcher(ctx, saKubeconfig, append(slices.Clone(dispatcherArgs), "--nomination-timeout=15s")...); err != nil {
			t.Fatal(err)
		}
		o, err := f.RunBatch(ctx, []*batchv1.Job{framework.MixedJobShapes[3].Job(ns, "renominated")}, 2*time.Minute)
		if err != nil {
			t.Fatalf("%v; the dispatcher's condition: %+v", err, findCondition(workloadOfJob(ctx, t, kc, ns, "renominated"), dispatcher.ConditionType))
		}
		if got := o["renominated"]; got.Cluster != "large" || fmt.Sprint(got.Nominations) != "[[small] [large]]" {
			t.Errorf("nominated %v, admitted by %s; want small, then large after the timeout", got.Nominations, got.Cluster)
		}
		metrics, err := f.DispatcherMetrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(metrics, "platform_dispatcher_renominations_total 1") {
			t.Errorf("renominations not counted:\n%s", grepLines(metrics, "platform_dispatcher_renominations"))
		}
	})

	t.Run("AllAtOnce side by side: a remote Workload per Job per worker", func(t *testing.T) {
		if err := f.StopDispatcher(); err != nil {
			t.Fatal(err)
		}
		if err := f.DeleteJobs(ctx, 3*time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := f.ManagerKueue.Restart(ctx, framework.KueueOptions{}); err != nil {
			t.Fatal(err)
		}
		jobs, _ := framework.MixedJobs(ns, "a")
		out, err := f.RunBatch(ctx, jobs, 4*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		logBatch(t, "AllAtOnce", out)
		for name, o := range out {
			if o.Remote["small"] != 1 || o.Remote["large"] != 1 {
				t.Errorf("%s: remote Workloads %v, want one on each worker", name, o.Remote)
			}
		}
		pending := unboundPods(ctx, t, f)
		t.Logf("AllAtOnce: %d pods left unbound on the worker that admitted their Job: %v", len(pending), pending)
	})
}

// waitWorkersSynced waits until the registry mirrors both workers, Synced.
func waitWorkersSynced(t *testing.T, platformClient versioned.Interface) {
	t.Helper()
	eventually(t, "both workers mirrored and Synced", 2*time.Minute, func(ctx context.Context) (bool, string) {
		var states []string
		for _, m := range []string{framework.SmallMember, "large"} {
			cc, err := platformClient.PlatformV1alpha1().ClusterCapacities().Get(ctx, m, apimeta.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			states = append(states, m+"="+string(cc.Status.Mirroring.State))
		}
		return !slices.ContainsFunc(states, func(s string) bool { return !strings.HasSuffix(s, "=Synced") }), strings.Join(states, " ")
	})
}

// assertPodsBound waits until every pod of the batch's Jobs is bound to
// a node of the worker that admitted it: none is left Pending where it
// does not fit.
func assertPodsBound(ctx context.Context, t *testing.T, f *framework.KueueFleet, jobs []*batchv1.Job, out framework.Batch) {
	t.Helper()
	want := map[string]int{}
	for _, j := range jobs {
		want[out[j.Name].Cluster] += int(*j.Spec.Parallelism)
	}
	var problems []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := f.WorkerPods(ctx)
		if err != nil {
			return false, nil // the last problems stand
		}
		problems = nil
		for worker, n := range want {
			bound := 0
			for _, p := range pods[worker] {
				if _, mine := out[p.Labels[batchv1.JobNameLabel]]; !mine {
					continue
				}
				if p.Spec.NodeName != "" {
					bound++
				} else {
					problems = append(problems, worker+"/"+p.Name+" unbound")
				}
			}
			if bound < n {
				problems = append(problems, fmt.Sprintf("%s: %d of %d pods bound", worker, bound, n))
			}
		}
		return len(problems) == 0, nil
	})
	if err != nil {
		t.Errorf("the batch's pods not all bound to a node of their worker after a minute: %s", strings.Join(problems, "; "))
	}
}

// unboundPods names the workers' pods no node took.
func unboundPods(ctx context.Context, t *testing.T, f *framework.KueueFleet) []string {
	t.Helper()
	var out []string
	// The scheduler's first attempts, and the pods' creation, take a moment.
	_ = wait.PollUntilContextTimeout(ctx, 2*time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if unbound, err := f.UnboundPods(ctx); err == nil {
			out = unbound
		}
		return false, nil
	})
	return out
}

func logBatch(t *testing.T, what string, b framework.Batch) {
	t.Helper()
	lat := b.ReservationToAdmission()
	if len(lat) == 0 {
		return
	}
	t.Logf("%s: reservation → admission over %d Jobs: p50 %s, p99 %s, max %s", what, len(lat),
		lat[len(lat)/2].Round(time.Millisecond), lat[(len(lat)*99)/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}

func workloadOfJob(ctx context.Context, t *testing.T, kc kueueClient, ns, job string) *kueue.Workload {
	t.Helper()
	wls, err := kc.KueueV1beta2().Workloads(ns).List(ctx, apimeta.ListOptions{})
	if err != nil {
		return nil
	}
	for i := range wls.Items {
		for _, ref := range wls.Items[i].OwnerReferences {
			if ref.Kind == "Job" && ref.Name == job {
				return &wls.Items[i]
			}
		}
	}
	return nil
}

func findCondition(wl *kueue.Workload, typ string) *apimeta.Condition {
	if wl == nil {
		return nil
	}
	return meta.FindStatusCondition(wl.Status.Conditions, typ)
}

func assertCondition(ctx context.Context, t *testing.T, kc kueueClient, ns, job string, status apimeta.ConditionStatus, reason, says string) {
	t.Helper()
	eventually(t, "the dispatcher's condition on "+job, 30*time.Second, func(ctx context.Context) (bool, string) {
		c := findCondition(workloadOfJob(ctx, t, kc, ns, job), dispatcher.ConditionType)
		return c != nil && c.Status == status && c.Reason == reason && strings.Contains(c.Message, says), fmt.Sprintf("%+v", c)
	})
}
