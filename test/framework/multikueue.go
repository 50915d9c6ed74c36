package framework

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// MultiKueueManagedBy is the spec.managedBy of a Job that MultiKueue runs
// on a worker: Kueue refuses to dispatch a Job without it, and the manager
// cluster's Job controller leaves it alone.
const MultiKueueManagedBy = kueue.MultiKueueControllerName

// MultiKueueWorker is a worker cluster for ConnectMultiKueue.
type MultiKueueWorker struct {
	Cluster *ControlPlane
	// Quota is the nominal quota of the worker's ClusterQueue.
	Quota corev1.ResourceList
	// Labels go on the manager's MultiKueueCluster of this worker.
	Labels map[string]string
}

// MultiKueueOptions names what ConnectMultiKueue creates and sizes the
// manager's quota. Empty names get the defaults in brackets.
type MultiKueueOptions struct {
	// Namespace holds the LocalQueue (and the Jobs) on every cluster
	// ["default"]; it is created where missing.
	Namespace string
	// ManagerQuota is the nominal quota of the manager's ClusterQueue,
	// which Workloads reserve before MultiKueue dispatches them.
	ManagerQuota corev1.ResourceList
	// ClusterQueue ["cluster-queue"], LocalQueue ["user-queue"] and
	// ResourceFlavor ["default-flavor"] have the same names on every
	// cluster; AdmissionCheck ["multikueue"] and MultiKueueConfig
	// ["multikueue"] exist on the manager only.
	ClusterQueue, LocalQueue, ResourceFlavor, AdmissionCheck, MultiKueueConfig string
	// Timeout bounds the wait for everything to become Active [2m].
	Timeout time.Duration
}

func (o MultiKueueOptions) withDefaults() MultiKueueOptions {
	o.Namespace = cmp.Or(o.Namespace, "default")
	o.ClusterQueue = cmp.Or(o.ClusterQueue, "cluster-queue")
	o.LocalQueue = cmp.Or(o.LocalQueue, "user-queue")
	o.ResourceFlavor = cmp.Or(o.ResourceFlavor, "default-flavor")
	o.AdmissionCheck = cmp.Or(o.AdmissionCheck, "multikueue")
	o.MultiKueueConfig = cmp.Or(o.MultiKueueConfig, "multikueue")
	o.Timeout = cmp.Or(o.Timeout, 2*time.Minute)
	return o
}

// ConnectMultiKueue wires a MultiKueue manager to its workers, each of which
// runs Kueue (StartKueue) already. On each worker: the namespace, a
// ResourceFlavor, a ClusterQueue with the worker's quota and a LocalQueue.
// On the manager: the same queues with ManagerQuota and the MultiKueue
// AdmissionCheck, which a MultiKueueConfig points at one MultiKueueCluster
// per worker (named by its key in workers), each reading the worker's admin
// kubeconfig from a Secret in KueueNamespace. It returns once every
// MultiKueueCluster, the AdmissionCheck and every ClusterQueue is Active.
func ConnectMultiKueue(ctx context.Context, manager *ControlPlane, workers map[string]MultiKueueWorker, opts MultiKueueOptions) error {
	if len(workers) == 0 {
		return errors.New("connect MultiKueue: no workers")
	}
	opts = opts.withDefaults()
	names := slices.Sorted(maps.Keys(workers))
	for _, name := range names {
		w := workers[name]
		if err := createQueues(ctx, w.Cluster, opts, w.Quota, ""); err != nil {
			return fmt.Errorf("worker %s: %w", name, err)
		}
	}
	if err := createMultiKueue(ctx, manager, workers, opts); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := createQueues(ctx, manager, opts, opts.ManagerQuota, opts.AdmissionCheck); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := waitMultiKueueActive(ctx, manager, names, opts); err != nil {
		return err
	}
	for _, name := range names {
		if err := waitActive(ctx, "worker "+name+"'s ClusterQueue", opts.Timeout, clusterQueueConditions(workers[name].Cluster, opts.ClusterQueue)); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).Info("MultiKueue connected", "workers", names, "clusterQueue", opts.ClusterQueue, "localQueue", klog.KRef(opts.Namespace, opts.LocalQueue))
	return nil
}

// createQueues creates the namespace, ResourceFlavor, ClusterQueue (with
// quota, and the admission check unless empty) and LocalQueue on cp.
func createQueues(ctx context.Context, cp *ControlPlane, opts MultiKueueOptions, quota corev1.ResourceList, admissionCheck string) error {
	kc, err := cp.KueueClient()
	if err != nil {
		return err
	}
	if err := cp.ensureNamespace(ctx, opts.Namespace); err != nil {
		return err
	}
	api := kc.KueueV1beta2()
	flavor := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: opts.ResourceFlavor}}
	if _, err := api.ResourceFlavors().Create(ctx, flavor, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ResourceFlavor %s: %w", opts.ResourceFlavor, err)
	}
	cq := &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: opts.ClusterQueue},
		Spec: kueue.ClusterQueueSpec{
			// Empty, not nil: nil selects no namespace.
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups:    []kueue.ResourceGroup{resourceGroup(kueue.ResourceFlavorReference(opts.ResourceFlavor), quota)},
		},
	}
	if admissionCheck != "" {
		cq.Spec.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{
			AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: kueue.AdmissionCheckReference(admissionCheck)}},
		}
	}
	if _, err := api.ClusterQueues().Create(ctx, cq, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ClusterQueue %s: %w", opts.ClusterQueue, err)
	}
	lq := &kueue.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: opts.LocalQueue, Namespace: opts.Namespace},
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(opts.ClusterQueue)},
	}
	if _, err := api.LocalQueues(opts.Namespace).Create(ctx, lq, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create LocalQueue %s/%s: %w", opts.Namespace, opts.LocalQueue, err)
	}
	return nil
}

// resourceGroup is one flavor with quota's resources, in name order.
func resourceGroup(flavor kueue.ResourceFlavorReference, quota corev1.ResourceList) kueue.ResourceGroup {
	g := kueue.ResourceGroup{Flavors: []kueue.FlavorQuotas{{Name: flavor}}}
	for _, name := range slices.Sorted(maps.Keys(quota)) {
		g.CoveredResources = append(g.CoveredResources, name)
		g.Flavors[0].Resources = append(g.Flavors[0].Resources, kueue.ResourceQuota{Name: name, NominalQuota: quota[name]})
	}
	return g
}

// createMultiKueue creates, on the manager, a kubeconfig Secret and a
// MultiKueueCluster per worker, the MultiKueueConfig listing them and the
// AdmissionCheck that uses it.
func createMultiKueue(ctx context.Context, manager *ControlPlane, workers map[string]MultiKueueWorker, opts MultiKueueOptions) error {
	kube, err := kubernetes.NewForConfig(manager.adminConfig)
	if err != nil {
		return err
	}
	kc, err := manager.KueueClient()
	if err != nil {
		return err
	}
	if err := manager.ensureNamespace(ctx, KueueNamespace); err != nil {
		return err
	}
	api := kc.KueueV1beta2()
	names := slices.Sorted(maps.Keys(workers))
	for _, name := range names {
		// The admin kubeconfig embeds its CA and client certificate and
		// names 127.0.0.1: what Kueue's kubeconfig validation accepts.
		kubeconfig, err := os.ReadFile(workers[name].Cluster.AdminKubeconfig())
		if err != nil {
			return err
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: multiKueueSecretName(name), Namespace: KueueNamespace},
			Data:       map[string][]byte{kueue.MultiKueueConfigSecretKey: kubeconfig},
		}
		if _, err := kube.CoreV1().Secrets(KueueNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create Secret %s/%s: %w", KueueNamespace, secret.Name, err)
		}
		cluster := &kueue.MultiKueueCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: workers[name].Labels},
			Spec: kueue.MultiKueueClusterSpec{ClusterSource: kueue.ClusterSource{
				KubeConfig: &kueue.KubeConfig{LocationType: kueue.SecretLocationType, Location: secret.Name},
			}},
		}
		if _, err := api.MultiKueueClusters().Create(ctx, cluster, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create MultiKueueCluster %s: %w", name, err)
		}
	}
	config := &kueue.MultiKueueConfig{
		ObjectMeta: metav1.ObjectMeta{Name: opts.MultiKueueConfig},
		Spec:       kueue.MultiKueueConfigSpec{Clusters: names},
	}
	if _, err := api.MultiKueueConfigs().Create(ctx, config, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create MultiKueueConfig %s: %w", opts.MultiKueueConfig, err)
	}
	check := &kueue.AdmissionCheck{
		ObjectMeta: metav1.ObjectMeta{Name: opts.AdmissionCheck},
		Spec: kueue.AdmissionCheckSpec{
			ControllerName: kueue.MultiKueueControllerName,
			Parameters: &kueue.AdmissionCheckParametersReference{
				APIGroup: kueue.GroupVersion.Group, Kind: "MultiKueueConfig", Name: opts.MultiKueueConfig,
			},
		},
	}
	if _, err := api.AdmissionChecks().Create(ctx, check, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create AdmissionCheck %s: %w", opts.AdmissionCheck, err)
	}
	return nil
}

// multiKueueSecretName is the Secret holding worker's kubeconfig.
func multiKueueSecretName(worker string) string { return "multikueue-" + worker }

// waitMultiKueueActive waits until the manager's MultiKueueClusters,
// AdmissionCheck and ClusterQueue are Active.
func waitMultiKueueActive(ctx context.Context, manager *ControlPlane, workers []string, opts MultiKueueOptions) error {
	kc, err := manager.KueueClient()
	if err != nil {
		return err
	}
	api := kc.KueueV1beta2()
	for _, name := range workers {
		err := waitActive(ctx, "MultiKueueCluster "+name, opts.Timeout, func(ctx context.Context) ([]metav1.Condition, error) {
			c, err := api.MultiKueueClusters().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return c.Status.Conditions, nil
		})
		if err != nil {
			return err
		}
	}
	err = waitActive(ctx, "AdmissionCheck "+opts.AdmissionCheck, opts.Timeout, func(ctx context.Context) ([]metav1.Condition, error) {
		c, err := api.AdmissionChecks().Get(ctx, opts.AdmissionCheck, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return c.Status.Conditions, nil
	})
	if err != nil {
		return err
	}
	return waitActive(ctx, "the manager's ClusterQueue", opts.Timeout, clusterQueueConditions(manager, opts.ClusterQueue))
}

// clusterQueueConditions reads ClusterQueue name's conditions on cp.
func clusterQueueConditions(cp *ControlPlane, name string) func(context.Context) ([]metav1.Condition, error) {
	return func(ctx context.Context) ([]metav1.Condition, error) {
		kc, err := cp.KueueClient()
		if err != nil {
			return nil, err
		}
		cq, err := kc.KueueV1beta2().ClusterQueues().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return cq.Status.Conditions, nil
	}
}

// waitActive polls conditions until the Active condition is True; its
// error carries the last reason and message.
func waitActive(ctx context.Context, what string, timeout time.Duration, conditions func(context.Context) ([]metav1.Condition, error)) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		conds, err := conditions(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		c := meta.FindStatusCondition(conds, "Active")
		if c == nil {
			last = "no Active condition yet"
			return false, nil
		}
		last = fmt.Sprintf("%s: %s", c.Reason, c.Message)
		return c.Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		return fmt.Errorf("%s not Active: %w (last: %s)", what, err, last)
	}
	return nil
}

// KueueClient returns a client of Kueue's API on cp as the admin.
func (cp *ControlPlane) KueueClient() (kueueclient.Interface, error) {
	return kueueclient.NewForConfig(cp.adminConfig)
}

// MultiKueueJob is a Job as Kueue's webhooks would leave it for MultiKueue
// (none run here): suspended, in LocalQueue queue, managed by MultiKueue.
// Its one pod requests requests (as its limits too).
func MultiKueueJob(namespace, name, queue string, requests corev1.ResourceList) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{KueueQueueNameLabel: queue}},
		Spec: batchv1.JobSpec{
			Suspend:   new(true),
			ManagedBy: new(MultiKueueManagedBy),
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "main", Image: "busybox", Command: []string{"sleep", "3600"},
						Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests},
					}},
				},
			},
		},
	}
}
