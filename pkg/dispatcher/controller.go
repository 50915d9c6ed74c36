package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"
	kueuelisters "sigs.k8s.io/kueue/client-go/listers/kueue/v1beta2"

	platform "github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	platformclient "github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	platforminformers "github.com/example/platform-apiserver/pkg/generated/informers/externalversions/platform/v1alpha1"
	platformlisters "github.com/example/platform-apiserver/pkg/generated/listers/platform/v1alpha1"
)

// Config is the dispatcher's behaviour.
type Config struct {
	Policy
	// RetryInterval is how soon a Workload nothing was nominated for is
	// asked about again.
	RetryInterval time.Duration
	// NominationTimeout is how long a nominated worker has to admit the
	// Workload before the dispatcher nominates the next best one.
	NominationTimeout time.Duration
	// Settle and PromiseExpiry configure the Ledger.
	Settle, PromiseExpiry time.Duration
	// Workers is how many Workloads are decided at once.
	Workers int
}

// Controller nominates, for each Workload waiting for its MultiKueue
// admission check with quota reserved in the manager, the worker cluster
// where PlacementReport says its pod sets fit.
type Controller struct {
	cfg      Config
	kueue    kueueclient.Interface
	platform platformclient.Interface
	recorder record.EventRecorder
	devices  DeviceResolver
	now      func() time.Time

	workloads kueuelisters.WorkloadLister
	checks    kueuelisters.AdmissionCheckLister
	configs   kueuelisters.MultiKueueConfigLister
	clusters  kueuelisters.MultiKueueClusterLister
	members   platformlisters.ClusterCapacityLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	ledger    *Ledger

	mu sync.Mutex
	// nominations are the dispatcher's own nominations still waiting for
	// a worker's admission, by Workload.
	nominations map[types.UID]*nomination
}

type nomination struct {
	clusters []string
	at       time.Time
	// tried are the clusters nominated before for this Workload whose
	// workers did not admit it in time.
	tried map[string]bool
}

// NewController wires the controller to the manager cluster's Kueue
// informers, the platform API and its ClusterCapacities (each member's
// free room), and devices for pod sets that claim DRA devices (nil: such
// pod sets are unmodelled).
func NewController(cfg Config, kc kueueclient.Interface, pc platformclient.Interface, devices DeviceResolver, informers kueueinformers.SharedInformerFactory, capacities platforminformers.ClusterCapacityInformer, recorder record.EventRecorder) (*Controller, error) {
	v := informers.Kueue().V1beta2()
	c := &Controller{
		cfg: cfg, kueue: kc, platform: pc, devices: devices, recorder: recorder, now: time.Now,
		workloads: v.Workloads().Lister(), checks: v.AdmissionChecks().Lister(),
		configs: v.MultiKueueConfigs().Lister(), clusters: v.MultiKueueClusters().Lister(),
		members: capacities.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "workloads"}),
		ledger:      &Ledger{Settle: cfg.Settle, Expiry: cfg.PromiseExpiry},
		nominations: map[types.UID]*nomination{},
	}
	_, err := v.Workloads().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.forget,
	})
	if err != nil {
		return nil, err
	}
	// A worker cluster turning Active (or a config changing) can let
	// waiting Workloads be nominated.
	requeueAll := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueAll() },
		UpdateFunc: func(any, any) { c.enqueueAll() },
	}
	for _, inf := range []cache.SharedIndexInformer{v.MultiKueueClusters().Informer(), v.MultiKueueConfigs().Informer(), v.AdmissionChecks().Informer()} {
		if _, err := inf.AddEventHandler(requeueAll); err != nil {
			return nil, err
		}
	}
	c.synced = []cache.InformerSynced{v.Workloads().Informer().HasSynced, v.AdmissionChecks().Informer().HasSynced,
		v.MultiKueueConfigs().Informer().HasSynced, v.MultiKueueClusters().Informer().HasSynced, capacities.Informer().HasSynced}
	return c, nil
}

// HasSynced says the informers have their first lists (readiness).
func (c *Controller) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Run decides Workloads until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("the Kueue informers did not sync")
	}
	klog.FromContext(ctx).Info("Dispatcher started", "workers", c.cfg.Workers, "whenNothingFits", c.cfg.WhenNothingFits, "maxDataAge", c.cfg.MaxDataAge,
		"promisesRecovered", c.recoverPromises(ctx))
	for range max(c.cfg.Workers, 1) {
		go wait.UntilWithContext(ctx, c.work, time.Second)
	}
	go wait.UntilWithContext(ctx, func(context.Context) { inFlightPromises.Set(float64(c.ledger.Len(c.now()))) }, 5*time.Second)
	<-ctx.Done()
	return nil
}

// everything selects every object of a lister.
var everything = labels.Everything()

// recoverPromises rebuilds the ledger from the Workloads, after a restart
// or a crash forgot it: every Workload nominated to one worker and not
// admitted yet (held from its nomination, as this process saw it now or
// the dispatcher's condition says), and every one admitted by a worker
// (held from its Admitted condition's time, as an admission). It returns
// how many it holds.
func (c *Controller) recoverPromises(ctx context.Context) int {
	wls, err := c.workloads.List(everything)
	if err != nil {
		return 0
	}
	now := c.now()
	n := 0
	for _, wl := range wls {
		cluster := ptr.Deref(wl.Status.ClusterName, "")
		if cluster == "" && len(wl.Status.NominatedClusterNames) == 1 {
			cluster = wl.Status.NominatedClusterNames[0]
		}
		if cluster == "" || finished(wl) {
			continue
		}
		podSets, err := PodSetsOf(ctx, wl, c.devices)
		if err != nil {
			continue
		}
		at := now
		if cond := apimeta.FindStatusCondition(wl.Status.Conditions, ConditionType); cond != nil && cond.Status == metav1.ConditionTrue {
			at = cond.LastTransitionTime.Time
		}
		c.ledger.Promise(wl.UID, c.memberOf(cluster), totalDemand(podSets), at)
		if wl.Status.ClusterName != nil {
			admitted := at
			if a := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); a != nil && a.Status == metav1.ConditionTrue {
				admitted = a.LastTransitionTime.Time
			}
			c.ledger.Admitted(wl.UID, admitted)
		}
		n++
	}
	return n
}

// memberOf is the registry member of the MultiKueueCluster named cluster.
func (c *Controller) memberOf(cluster string) string {
	if mkc, err := c.clusters.Get(cluster); err == nil {
		return memberName(mkc)
	}
	return cluster
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

func (c *Controller) enqueueAll() {
	wls, err := c.workloads.List(everything)
	if err != nil {
		return
	}
	for _, wl := range wls {
		c.enqueue(wl)
	}
}

func (c *Controller) forget(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if wl, ok := obj.(*kueue.Workload); ok {
		c.release(wl.UID)
	}
}

func (c *Controller) release(uid types.UID) {
	c.ledger.Release(uid)
	c.mu.Lock()
	delete(c.nominations, uid)
	c.mu.Unlock()
}

func (c *Controller) work(ctx context.Context) {
	for {
		key, quit := c.queue.Get()
		if quit {
			return
		}
		requeue, err := c.sync(ctx, key)
		switch {
		case err != nil:
			klog.FromContext(ctx).Error(err, "Deciding a Workload failed; retrying", "workload", key)
			c.queue.AddRateLimited(key)
		case requeue > 0:
			c.queue.Forget(key)
			c.queue.AddAfter(key, requeue)
		default:
			c.queue.Forget(key)
		}
		c.queue.Done(key)
	}
}

// sync decides one Workload: nothing to do, nominate, or wait. It returns
// when to look again.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	wl, err := c.workloads.Workloads(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	now := c.now()
	if finished(wl) {
		c.release(wl.UID)
		return 0, nil
	}
	if wl.Status.ClusterName != nil {
		c.ledger.Admitted(wl.UID, now)
		c.mu.Lock()
		delete(c.nominations, wl.UID)
		c.mu.Unlock()
		return 0, nil
	}
	state, ac := multiKueueCheck(wl, c.checks)
	if state == nil || state.State != kueue.CheckStatePending {
		return 0, nil
	}
	if !quotaReserved(wl) {
		// Evicted or requeued in the manager: what was promised is void.
		c.release(wl.UID)
		return 0, nil
	}
	exclude, wait := c.nominationPending(wl, now)
	if wait > 0 {
		return wait, nil
	}
	return c.decide(ctx, wl, ac, exclude)
}

// nominationPending looks at the Workload's current nomination: while it
// is younger than NominationTimeout the dispatcher waits for the worker;
// after it, the clusters tried so far are excluded from the next choice
// (all of them tried: none is).
func (c *Controller) nominationPending(wl *kueue.Workload, now time.Time) (map[string]bool, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nominations[wl.UID]
	if len(wl.Status.NominatedClusterNames) == 0 {
		if n != nil {
			return n.tried, 0
		}
		return nil, 0
	}
	if n == nil || !sameSet(n.clusters, wl.Status.NominatedClusterNames) {
		// Nominated before this process knew it (a restart, or another
		// writer): its time starts now.
		n = &nomination{clusters: wl.Status.NominatedClusterNames, at: now, tried: map[string]bool{}}
		c.nominations[wl.UID] = n
	}
	if left := n.at.Add(c.cfg.NominationTimeout).Sub(now); left > 0 {
		return nil, left
	}
	for _, cl := range n.clusters {
		n.tried[cl] = true
	}
	return n.tried, 0
}

func (c *Controller) decide(ctx context.Context, wl *kueue.Workload, ac *kueue.AdmissionCheck, exclude map[string]bool) (time.Duration, error) {
	logger := klog.FromContext(ctx).WithValues("workload", klog.KObj(wl))
	began := c.now()
	cands, inactive, err := candidates(ac, c.configs, c.clusters)
	if err != nil {
		return c.wait(ctx, wl, ReasonNoCandidate, err.Error())
	}
	cands = withoutTried(cands, exclude)
	if len(cands) == 0 {
		return c.wait(ctx, wl, ReasonNoCandidate, fmt.Sprintf("no Active worker cluster to nominate (inactive: %v)", inactive))
	}
	podSets, err := PodSetsOf(ctx, wl, c.devices)
	var unmodelled *Unmodelled
	var d Decision
	switch {
	case errors.As(err, &unmodelled):
		d, err = c.unmodelledFallback(ctx, cands, unmodelled)
	case err != nil:
		return 0, err
	default:
		d, err = c.choose(ctx, wl, podSets, cands)
	}
	if err != nil {
		return c.registryError(ctx, wl, err)
	}
	decisionDuration.Observe(c.now().Sub(began).Seconds())
	if len(d.Nominate) == 0 {
		return c.wait(ctx, wl, d.Reason, d.Message)
	}
	if err := nominate(ctx, c.kueue, wl, d.Nominate); err != nil {
		return 0, fmt.Errorf("write the nomination of %v: %w", d.Nominate, err)
	}
	now := c.now()
	if d.Member != "" {
		c.ledger.Promise(wl.UID, d.Member, totalDemand(podSets), now)
	}
	c.mu.Lock()
	n := c.nominations[wl.UID]
	if n == nil {
		n = &nomination{tried: map[string]bool{}}
		c.nominations[wl.UID] = n
	} else {
		renominations.Inc()
	}
	n.clusters, n.at = d.Nominate, now
	c.mu.Unlock()
	nominations.WithLabelValues(d.Reason).Inc()
	logger.V(2).Info("Nominated", "clusters", d.Nominate, "reason", d.Reason, "verdicts", d.Message)
	c.recorder.Event(wl, corev1.EventTypeNormal, "Nominated", d.Message)
	if err := setCondition(ctx, c.kueue, wl, metav1.ConditionTrue, d.Reason, d.Message); err != nil {
		logger.Error(err, "Writing the dispatcher's condition failed")
	}
	return c.cfg.NominationTimeout, nil
}

// choose asks one PlacementReport per pod set over the candidates'
// members and chooses among them.
func (c *Controller) choose(ctx context.Context, wl *kueue.Workload, podSets []PodSet, cands []Candidate) (Decision, error) {
	members := make([]string, 0, len(cands))
	seen := map[string]bool{}
	for _, cd := range cands {
		if !seen[cd.Member] {
			seen[cd.Member] = true
			members = append(members, cd.Member)
		}
	}
	answers := make([]map[string]platform.PlacementClusterFit, len(podSets))
	for i, ps := range podSets {
		spec := ps.Spec
		spec.Clusters = members
		began := c.now()
		r, err := c.platform.PlatformV1alpha1().PlacementReports().Create(ctx,
			&platform.PlacementReport{ObjectMeta: metav1.ObjectMeta{GenerateName: wl.Name + "-"}, Spec: spec}, metav1.CreateOptions{})
		reportDuration.Observe(c.now().Sub(began).Seconds())
		if err != nil {
			return Decision{}, &registryErr{err: err}
		}
		answers[i] = map[string]platform.PlacementClusterFit{}
		for _, f := range r.Status.Clusters {
			answers[i][f.Cluster] = f
		}
	}
	now := c.now()
	return Choose(podSets, answers, cands, func(member string) MemberRoom {
		free, staleSince := c.freeRoom(member, now)
		return MemberRoom{Free: free, Promised: c.ledger.InFlight(member, wl.UID, now, staleSince)}
	}, c.cfg.Policy), nil
}

// freeRoom is the member's free room as its ClusterCapacity sums it over
// schedulable nodes (cpu, memory, pods, extended resources, free devices
// per driver), nil when the informer has none, and since when its mirror
// is not current (zero while Synced; now when unknown).
func (c *Controller) freeRoom(member string, now time.Time) (corev1.ResourceList, time.Time) {
	cc, err := c.members.Get(member)
	if err != nil {
		return nil, now
	}
	m := cc.Status.Mirroring
	switch {
	case m.State == platform.MirroringSynced:
		return FreeRoom(cc), time.Time{}
	case m.Since != nil:
		return FreeRoom(cc), m.Since.Time
	}
	return FreeRoom(cc), now
}

// FreeRoom is a ClusterCapacity's free room by resource name: its
// schedulable nodes' available cpu, memory, pods and extended resources,
// and its free devices per driver under DevicePrefix.
func FreeRoom(cc *platform.ClusterCapacity) corev1.ResourceList {
	a := cc.Status.Schedulable.Available
	out := corev1.ResourceList{
		corev1.ResourceCPU: a.CPU.DeepCopy(), corev1.ResourceMemory: a.Memory.DeepCopy(),
		corev1.ResourcePods: *resource.NewQuantity(a.Pods, resource.DecimalSI),
	}
	for name, q := range a.Other {
		out[corev1.ResourceName(name)] = q.DeepCopy()
	}
	if d := cc.Status.Devices; d != nil {
		for _, dr := range d.Drivers {
			out[corev1.ResourceName(DevicePrefix+dr.Driver)] = *resource.NewQuantity(dr.Free, resource.DecimalSI)
		}
	}
	return out
}

// unmodelledFallback nominates, for a Workload PlacementReport cannot
// answer for, every candidate whose mirror is current (or, when none is,
// within MaxDataAge), as AllAtOnce would: the workers' own admission
// decides.
func (c *Controller) unmodelledFallback(ctx context.Context, cands []Candidate, why *Unmodelled) (Decision, error) {
	var current, recent []string
	for _, cd := range cands {
		cc, err := c.platform.PlatformV1alpha1().ClusterCapacities().Get(ctx, cd.Member, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return Decision{}, &registryErr{err: err}
		}
		m := cc.Status.Mirroring
		switch {
		case m.State == platform.MirroringSynced:
			current = append(current, cd.Cluster)
		case m.DataAge != nil && m.DataAge.Duration <= c.cfg.MaxDataAge:
			recent = append(recent, cd.Cluster)
		}
	}
	nominate := current
	if len(nominate) == 0 {
		nominate = recent
	}
	if len(nominate) == 0 {
		return Decision{Reason: ReasonNoCandidate, Message: why.Error() + "; and no member's data is current enough to nominate"}, nil
	}
	return Decision{Nominate: nominate, Reason: ReasonUnmodelled,
		Message: fmt.Sprintf("%s; nominated every worker whose data is current (%v), as AllAtOnce would", why.Error(), nominate)}, nil
}

// wait records that nothing was nominated and why, and asks again after
// RetryInterval.
func (c *Controller) wait(ctx context.Context, wl *kueue.Workload, reason, message string) (time.Duration, error) {
	waits.WithLabelValues(reason).Inc()
	klog.FromContext(ctx).V(2).Info("Not nominated", "workload", klog.KObj(wl), "reason", reason, "message", message)
	if old := apimeta.FindStatusCondition(wl.Status.Conditions, ConditionType); old == nil || old.Reason != reason {
		c.recorder.Event(wl, corev1.EventTypeWarning, reason, message)
	}
	if err := setCondition(ctx, c.kueue, wl, metav1.ConditionFalse, reason, message); err != nil {
		return 0, err
	}
	return c.cfg.RetryInterval, nil
}

// registryErr is a failure to ask the platform API.
type registryErr struct{ err error }

func (e *registryErr) Error() string { return e.err.Error() }
func (e *registryErr) Unwrap() error { return e.err }

// Reasons the platform API gave no answer.
const (
	ReasonForbidden           = "PlatformAccessDenied"
	ReasonRegistryUnavailable = "RegistryUnavailable"
)

// registryError nominates nothing when the platform API cannot answer: a
// condition says why (naming the permission when it is one), and the
// Workload is retried with backoff.
func (c *Controller) registryError(ctx context.Context, wl *kueue.Workload, err error) (time.Duration, error) {
	reason, msg := ReasonRegistryUnavailable, fmt.Sprintf("the platform API did not answer, nothing nominated (retrying): %v", err)
	if apierrors.IsForbidden(err) {
		reason = ReasonForbidden
		msg = fmt.Sprintf("the dispatcher may not ask the platform API, nothing nominated: %v (grant it create on placementreports.platform.example.io and get on clustercapacities.platform.example.io: the platform-kueue-dispatcher ClusterRole)", err)
	}
	waits.WithLabelValues(reason).Inc()
	if old := apimeta.FindStatusCondition(wl.Status.Conditions, ConditionType); old == nil || old.Reason != reason {
		c.recorder.Event(wl, corev1.EventTypeWarning, reason, msg)
	}
	if cerr := setCondition(ctx, c.kueue, wl, metav1.ConditionFalse, reason, msg); cerr != nil {
		klog.FromContext(ctx).Error(cerr, "Writing the dispatcher's condition failed", "workload", klog.KObj(wl))
	}
	return 0, err
}

func withoutTried(cands []Candidate, tried map[string]bool) []Candidate {
	var out []Candidate
	for _, c := range cands {
		if !tried[c.Cluster] {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		// Every worker was tried: start a new round over all of them.
		return cands
	}
	return out
}

func totalDemand(podSets []PodSet) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, ps := range podSets {
		for r, q := range ps.Demand() {
			total := sum[r]
			total.Add(q)
			sum[r] = total
		}
	}
	return sum
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}
