package dispatcher

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuefake "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"

	platformfake "github.com/example/platform-apiserver/pkg/generated/clientset/versioned/fake"
	platforminformers "github.com/example/platform-apiserver/pkg/generated/informers/externalversions"
)

// A restarted dispatcher rebuilds its promises from the Workloads: one
// nominated to a worker (held from the dispatcher's condition's time) and
// one a worker admitted (held as an admission from its Admitted time),
// each against the member its MultiKueueCluster maps to; a Workload
// nominated to nobody or finished holds nothing.
func TestRecoverPromises(t *testing.T) {
	now := time.Unix(10_000, 0)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(d)) }
	wl := func(name string, edit func(*kueue.Workload)) *kueue.Workload {
		w := workload(kueue.PodSet{Name: "main", Count: 2, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{container("1", "1Gi")}}}})
		w.Name, w.UID = name, apitypes.UID("uid-"+name)
		edit(w)
		return w
	}
	nominated := wl("nominated", func(w *kueue.Workload) {
		w.Status.NominatedClusterNames = []string{"small"}
		w.Status.Conditions = []metav1.Condition{{Type: ConditionType, Status: metav1.ConditionTrue, Reason: ReasonFits, LastTransitionTime: at(-2 * time.Minute)}}
	})
	admitted := wl("admitted", func(w *kueue.Workload) {
		w.Status.ClusterName = new("large")
		w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: at(-5 * time.Second)}}
	})
	waiting := wl("waiting", func(*kueue.Workload) {})
	done := wl("done", func(w *kueue.Workload) {
		w.Status.NominatedClusterNames = []string{"small"}
		w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: at(-time.Minute)}}
	})
	small := &kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: "small", Labels: map[string]string{MemberLabel: "worker-small"}}}

	kc := kueuefake.NewSimpleClientset(nominated, admitted, waiting, done, small)
	informers := kueueinformers.NewSharedInformerFactory(kc, 0)
	platformInformers := platforminformers.NewSharedInformerFactory(platformfake.NewSimpleClientset(), 0)
	c, err := NewController(Config{Settle: 15 * time.Second, PromiseExpiry: 5 * time.Minute, Workers: 1},
		kc, nil, nil, informers, platformInformers.Platform().V1alpha1().ClusterCapacities(), record.NewFakeRecorder(10))
	if err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return now }
	informers.Start(t.Context().Done())
	platformInformers.Start(t.Context().Done())
	if !cache.WaitForCacheSync(t.Context().Done(), c.synced...) {
		t.Fatal("informers did not sync")
	}
	if n := c.recoverPromises(t.Context()); n != 2 {
		t.Fatalf("recovered %d promises, want 2 (nominated, admitted)", n)
	}
	cpu := func(member string, when time.Time) string {
		q := c.ledger.InFlight(member, "", when, time.Time{})[corev1.ResourceCPU]
		return q.String()
	}
	if got := cpu("worker-small", now); got != "2" {
		t.Errorf("worker-small (the MultiKueueCluster small's member) holds %s CPUs, want 2", got)
	}
	if got := cpu("large", now); got != "2" {
		t.Errorf("large holds %s CPUs, want 2 (admitted 5 s ago, settling)", got)
	}
	if got := cpu("large", now.Add(11*time.Second)); got != "0" {
		t.Errorf("large holds %s CPUs after the settle time, want 0", got)
	}
	if got := cpu("worker-small", now.Add(3*time.Minute)); got != "0" {
		t.Errorf("the nomination of 2 min ago is held %s CPUs past the promise expiry, want 0", got)
	}
}
