package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"

	"github.com/example/platform-apiserver/test/framework/postgres"
)

// KueueFleetWorker is one worker cluster of a KueueFleet.
type KueueFleetWorker struct {
	// Nodes are its kwok nodes.
	Nodes []SimulatedNode
	// Quota is its ClusterQueue's nominal quota.
	Quota corev1.ResourceList
	// Labels go on its MultiKueueCluster in the manager.
	Labels map[string]string
}

// KueueFleetOptions configures StartKueueFleet.
type KueueFleetOptions struct {
	// Workers by name: the MultiKueueCluster's name and, unless its
	// Labels map it elsewhere, the member's.
	Workers map[string]KueueFleetWorker
	// ManagerQuota is the manager's ClusterQueue's quota.
	ManagerQuota corev1.ResourceList
	// DispatcherName is the manager Kueue's MultiKueue dispatcher.
	DispatcherName string
	// ExtraPlatformArgs are appended to the manager's platform-apiserver's.
	ExtraPlatformArgs []string
	// Log receives every process's output, as Options.Log.
	Log io.Writer
	// Namespace of the queues and Jobs ["default"].
	Namespace string
	// DatabaseURL and PlatformAPIServerBinary are the manager's, as in
	// Options.
	DatabaseURL, PlatformAPIServerBinary string
}

// KueueFleetForTest starts a KueueFleet for t on a fresh database and
// stops it in t.Cleanup, keeping the work directories of a failed test.
func KueueFleetForTest(t testing.TB, opts KueueFleetOptions) *KueueFleet {
	t.Helper()
	if opts.DatabaseURL == "" {
		opts.DatabaseURL = postgres.NewTestDatabase(t)
	}
	f, err := StartKueueFleet(t.Context(), opts)
	if err != nil {
		t.Fatalf("start the Kueue fleet: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for name, cp := range f.all() {
				cp.keepWorkDir()
				t.Logf("%s: logs kept in %s", name, cp.WorkDir())
			}
		}
		if err := f.Stop(); err != nil {
			t.Errorf("stop the Kueue fleet: %v", err)
		}
	})
	return f
}

// KueueFleet is Kueue's MultiKueue on the real stack: a manager cluster
// (the full stack, whose platform-apiserver mirrors every worker as a
// member) running Kueue, and worker clusters each with kwok nodes,
// kube-scheduler, the job controller and a Kueue of their own.
type KueueFleet struct {
	Manager      *ControlPlane
	ManagerKueue *Kueue
	Workers      map[string]*ControlPlane
	Namespace    string

	membersDir string
	// relays carry the platform-apiserver's connections to each worker.
	relays map[string]*Relay

	mu             sync.Mutex
	dispatcher     *process
	dispatcherPort int
}

// StartKueueFleet starts the workers, then the manager with its members
// directory listing them, Kueue everywhere, and connects MultiKueue. On
// error everything started is stopped.
func StartKueueFleet(ctx context.Context, opts KueueFleetOptions) (_ *KueueFleet, err error) {
	f := &KueueFleet{Workers: map[string]*ControlPlane{}, Namespace: opts.Namespace, relays: map[string]*Relay{}}
	if f.Namespace == "" {
		f.Namespace = "default"
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Stop())
		}
	}()
	members, err := os.MkdirTemp("", "kueue-fleet-members-")
	if err != nil {
		return nil, err
	}
	f.membersDir = members
	names := slices.Sorted(maps.Keys(opts.Workers))
	for _, name := range names {
		w, err := Start(ctx, Options{
			WithoutPlatform: true, StartSimulator: true, StartScheduler: true,
			StartControllerManager: true, StartJobController: true, Log: opts.Log,
		})
		if err != nil {
			return nil, fmt.Errorf("worker %s: %w", name, err)
		}
		f.Workers[name] = w
		for _, n := range opts.Workers[name].Nodes {
			if _, err := w.CreateSimulatedNode(ctx, n); err != nil {
				return nil, fmt.Errorf("worker %s: node %s: %w", name, n.Name, err)
			}
		}
		member := name
		if m := opts.Workers[name].Labels["platform.example.io/member"]; m != "" {
			member = m
		}
		if err := f.writeMemberKubeconfig(name, filepath.Join(members, member)); err != nil {
			return nil, err
		}
	}
	f.Manager, err = Start(ctx, Options{
		Log: opts.Log, DatabaseURL: opts.DatabaseURL, PlatformAPIServerBinary: opts.PlatformAPIServerBinary,
		// The garbage collector deletes a deleted Job's Workload.
		StartControllerManager: true,
		ExtraPlatformArgs: append([]string{"--cluster-id=manager", "--kubeconfig=kubeconfig", "--member-kubeconfig-dir=" + members, "--member-kubeconfig-dir-interval=300ms",
			"--discovery-batch-delay=50ms"}, opts.ExtraPlatformArgs...),
	})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	workers := map[string]MultiKueueWorker{}
	for _, name := range names {
		if _, err := f.Workers[name].StartKueue(ctx, KueueOptions{}); err != nil {
			return nil, fmt.Errorf("worker %s: %w", name, err)
		}
		workers[name] = MultiKueueWorker{Cluster: f.Workers[name], Quota: opts.Workers[name].Quota, Labels: opts.Workers[name].Labels}
	}
	if f.ManagerKueue, err = f.Manager.StartKueue(ctx, KueueOptions{DispatcherName: opts.DispatcherName}); err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	if err := ConnectMultiKueue(ctx, f.Manager, workers, MultiKueueOptions{Namespace: f.Namespace, ManagerQuota: opts.ManagerQuota}); err != nil {
		return nil, err
	}
	return f, nil
}

// writeMemberKubeconfig writes the worker's admin kubeconfig to path,
// reaching it through a relay of its own (CutMember).
func (f *KueueFleet) writeMemberKubeconfig(worker, path string) error {
	w := f.Workers[worker]
	r, err := StartRelay(strings.TrimPrefix(w.KubeAPIServerURL(), "https://"))
	if err != nil {
		return err
	}
	f.relays[worker] = r
	cfg, err := clientcmd.LoadFromFile(w.AdminKubeconfig())
	if err != nil {
		return err
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + r.Addr()
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// CutMember takes the worker's API away from the platform-apiserver alone
// (its relay refuses connections): its mirror turns Unreachable and
// stale, while Kueue still reaches the worker.
func (f *KueueFleet) CutMember(worker string) { f.relays[worker].Stop() }

// RestoreMember gives the platform-apiserver the worker's API back.
func (f *KueueFleet) RestoreMember(ctx context.Context, worker string) error {
	return f.relays[worker].Restart(ctx)
}

// Stop stops the dispatcher, the manager and the workers.
func (f *KueueFleet) Stop() error {
	for _, r := range f.relays {
		r.Stop()
	}
	errs := []error{f.StopDispatcher()}
	if f.Manager != nil {
		errs = append(errs, f.Manager.Stop())
	}
	for _, w := range f.Workers {
		errs = append(errs, w.Stop())
	}
	if f.membersDir != "" {
		errs = append(errs, os.RemoveAll(f.membersDir))
	}
	return errors.Join(errs...)
}

// StartDispatcher builds ./cmd/kueue-dispatcher and runs it against the
// manager with kubeconfig (its identity) and args, until /readyz answers.
func (f *KueueFleet) StartDispatcher(ctx context.Context, kubeconfig string, args ...string) error {
	bin, err := f.DispatcherBinary(ctx)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	args = append([]string{"--kubeconfig=" + kubeconfig, "--bind-address=127.0.0.1:" + strconv.Itoa(port), "-v=2"}, args...)
	p, err := f.Manager.startComponent(ctx, "kueue-dispatcher", bin, args, time.Minute,
		httpCheck("http://127.0.0.1:"+strconv.Itoa(port)+"/readyz", nil))
	if err != nil {
		return fmt.Errorf("start the dispatcher: %w", err)
	}
	f.mu.Lock()
	f.dispatcher, f.dispatcherPort = p, port
	f.mu.Unlock()
	return nil
}

// DispatcherBinary builds ./cmd/kueue-dispatcher into the manager's work
// directory (once) and returns its path.
func (f *KueueFleet) DispatcherBinary(ctx context.Context) (string, error) {
	bin := filepath.Join(f.Manager.workDir, "platform-kueue-dispatcher")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := BuildCommand(ctx, "./cmd/kueue-dispatcher", bin); err != nil {
		return "", err
	}
	return bin, nil
}

// takeDispatcher returns the running dispatcher's process, nil if none,
// and forgets it.
func (f *KueueFleet) takeDispatcher() *process {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.dispatcher
	f.dispatcher = nil
	return p
}

// StopDispatcher stops the dispatcher if it runs.
func (f *KueueFleet) StopDispatcher() error {
	if p := f.takeDispatcher(); p != nil {
		return p.stop()
	}
	return nil
}

// KillDispatcher kills the dispatcher (SIGKILL), as a crash does.
func (f *KueueFleet) KillDispatcher() error {
	if p := f.takeDispatcher(); p != nil {
		return p.kill()
	}
	return errors.New("kill the dispatcher: not running")
}

// DispatcherLogPath is the dispatcher's log file.
func (f *KueueFleet) DispatcherLogPath() string {
	return filepath.Join(f.Manager.workDir, "kueue-dispatcher.log")
}

// DispatcherMetrics returns the running dispatcher's /metrics.
func (f *KueueFleet) DispatcherMetrics(ctx context.Context) (string, error) {
	f.mu.Lock()
	port := f.dispatcherPort
	f.mu.Unlock()
	return httpGet(ctx, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics")
}

func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), nil
}

// JobOutcome is what became of one Job's Workload, as watches saw it.
type JobOutcome struct {
	Job string
	// Reserved is when the manager's Workload was first seen with quota
	// reserved; Admitted when first seen with status.clusterName.
	Reserved, Admitted time.Time
	// Nominations are the distinct nominated cluster lists seen, in order.
	Nominations [][]string
	// Cluster is the worker that admitted it.
	Cluster string
	// Remote counts the remote Workloads created for it, by worker.
	Remote map[string]int
}

// Batch is the outcome of RunBatch, by Job name.
type Batch map[string]*JobOutcome

// ReservationToAdmission are the times from quota reservation in the
// manager to a worker's admission, of the Jobs admitted.
func (b Batch) ReservationToAdmission() []time.Duration {
	var out []time.Duration
	for _, o := range b {
		if !o.Admitted.IsZero() && !o.Reserved.IsZero() {
			out = append(out, o.Admitted.Sub(o.Reserved))
		}
	}
	slices.Sort(out)
	return out
}

// batchObserver records Workload events of the manager and the workers.
type batchObserver struct {
	mu    sync.Mutex
	batch Batch
	// byWorkload maps a Workload's name to its Job's.
	byWorkload map[string]string
}

func (o *batchObserver) outcome(wl *kueue.Workload) *JobOutcome {
	job, ok := o.byWorkload[wl.Name]
	if !ok {
		for _, ref := range wl.OwnerReferences {
			if ref.Kind == "Job" {
				job = ref.Name
			}
		}
		if _, mine := o.batch[job]; !mine {
			return nil
		}
		o.byWorkload[wl.Name] = job
	}
	return o.batch[job]
}

func (o *batchObserver) manager(obj any) {
	wl, ok := obj.(*kueue.Workload)
	if !ok {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.outcome(wl)
	if out == nil {
		return
	}
	if out.Reserved.IsZero() && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
		out.Reserved = now
	}
	if n := wl.Status.NominatedClusterNames; len(n) > 0 {
		if len(out.Nominations) == 0 || !slices.Equal(out.Nominations[len(out.Nominations)-1], n) {
			out.Nominations = append(out.Nominations, slices.Clone(n))
		}
	}
	if wl.Status.ClusterName != nil && out.Admitted.IsZero() {
		out.Admitted, out.Cluster = now, *wl.Status.ClusterName
	}
}

func (o *batchObserver) remote(worker string) func(any) {
	return func(obj any) {
		wl, ok := obj.(*kueue.Workload)
		if !ok {
			return
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if out := o.outcome(wl); out != nil {
			out.Remote[worker]++
		}
	}
}

// RunBatch creates jobs in the manager and waits until every one is
// admitted by a worker (status.clusterName), or timeout; the outcome holds
// what the watches saw either way.
func (f *KueueFleet) RunBatch(ctx context.Context, jobs []*batchv1.Job, timeout time.Duration) (Batch, error) {
	obs := &batchObserver{batch: Batch{}, byWorkload: map[string]string{}}
	for _, j := range jobs {
		obs.batch[j.Name] = &JobOutcome{Job: j.Name, Remote: map[string]int{}}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := f.watchWorkloads(ctx, f.Manager, cache.ResourceEventHandlerFuncs{
		AddFunc: obs.manager, UpdateFunc: func(_, obj any) { obs.manager(obj) },
	}); err != nil {
		return nil, err
	}
	for name, w := range f.Workers {
		if err := f.watchWorkloads(ctx, w, cache.ResourceEventHandlerFuncs{AddFunc: obs.remote(name)}); err != nil {
			return nil, err
		}
	}
	kube, err := kubernetes.NewForConfig(f.Manager.AdminConfig())
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if _, err := kube.BatchV1().Jobs(j.Namespace).Create(ctx, j, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create Job %s: %w", j.Name, err)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		obs.mu.Lock()
		var waiting []string
		for name, o := range obs.batch {
			if o.Admitted.IsZero() {
				waiting = append(waiting, name)
			}
		}
		snapshot := maps.Clone(obs.batch)
		obs.mu.Unlock()
		if len(waiting) == 0 {
			return snapshot, nil
		}
		if time.Now().After(deadline) {
			slices.Sort(waiting)
			return snapshot, fmt.Errorf("%d of %d Jobs not admitted by a worker after %s: %v", len(waiting), len(jobs), timeout, waiting)
		}
		select {
		case <-ctx.Done():
			return snapshot, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watchWorkloads runs an informer of cp's Workloads with h until ctx ends.
func (f *KueueFleet) watchWorkloads(ctx context.Context, cp *ControlPlane, h cache.ResourceEventHandler) error {
	kc, err := cp.KueueClient()
	if err != nil {
		return err
	}
	factory := kueueinformers.NewSharedInformerFactoryWithOptions(kc, 0, kueueinformers.WithNamespace(f.Namespace))
	inf := factory.Kueue().V1beta2().Workloads().Informer()
	if _, err := inf.AddEventHandler(h); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return errors.New("the Workload informer did not sync")
	}
	return nil
}

// WorkerPods lists each worker's pods of Jobs in the fleet's namespace.
func (f *KueueFleet) WorkerPods(ctx context.Context) (map[string][]corev1.Pod, error) {
	out := map[string][]corev1.Pod{}
	for name, w := range f.Workers {
		kube, err := kubernetes.NewForConfig(w.AdminConfig())
		if err != nil {
			return nil, err
		}
		pods, err := kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel})
		if err != nil {
			return nil, fmt.Errorf("worker %s: %w", name, err)
		}
		out[name] = pods.Items
	}
	return out, nil
}

// UnboundPods names the workers' Job pods no node took, as worker/pod,
// sorted.
func (f *KueueFleet) UnboundPods(ctx context.Context) ([]string, error) {
	pods, err := f.WorkerPods(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for worker, ps := range pods {
		for _, p := range ps {
			if p.Spec.NodeName == "" {
				out = append(out, worker+"/"+p.Name)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// DeleteJobs deletes every Job of the namespace in the manager (their
// pods' Workloads go with them) and waits until no worker has a Workload
// or a Job's pod left there: MultiKueue's garbage collector removes the
// remote objects.
func (f *KueueFleet) DeleteJobs(ctx context.Context, timeout time.Duration) error {
	kube, err := kubernetes.NewForConfig(f.Manager.AdminConfig())
	if err != nil {
		return err
	}
	background := metav1.DeletePropagationBackground
	if err := kube.BatchV1().Jobs(f.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &background}, metav1.ListOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		left, err := f.leftovers(ctx)
		if err != nil {
			return err
		}
		if left == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after deleting the Jobs, %s after %s", left, timeout)
		}
		klog.FromContext(ctx).V(2).Info("Waiting for the Jobs' objects to go", "left", left)
		time.Sleep(time.Second)
	}
}

func (f *KueueFleet) leftovers(ctx context.Context) (string, error) {
	for name, cp := range f.all() {
		kc, err := cp.KueueClient()
		if err != nil {
			return "", err
		}
		wls, err := kc.KueueV1beta2().Workloads(f.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		if n := len(wls.Items); n > 0 {
			return fmt.Sprintf("%s still has %d Workloads", name, n), nil
		}
	}
	pods, err := f.WorkerPods(ctx)
	if err != nil {
		return "", err
	}
	for name, ps := range pods {
		if len(ps) > 0 {
			return fmt.Sprintf("worker %s still has %d pods", name, len(ps)), nil
		}
	}
	return "", nil
}

func (f *KueueFleet) all() map[string]*ControlPlane {
	out := map[string]*ControlPlane{"manager": f.Manager}
	for name, w := range f.Workers {
		out["worker "+name] = w
	}
	return out
}
