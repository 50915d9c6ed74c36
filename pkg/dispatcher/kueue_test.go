package dispatcher

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The nomination is written as Kueue's admission status apply: every field
// Kueue's own apply carries stays in it (or Kueue's field manager would
// lose them), the dispatcher's condition and other managers' fields stay
// out, and the resourceVersion makes a stale read a conflict.
func TestAdmissionApply(t *testing.T) {
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", UID: "u1", ResourceVersion: "42", Generation: 3, Labels: map[string]string{"l": "v"}}}
	wl.Status.Admission = &kueue.Admission{ClusterQueue: "cq"}
	wl.Status.Conditions = []metav1.Condition{
		{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved"},
		{Type: ConditionType, Status: metav1.ConditionFalse, Reason: ReasonWaiting},
		{Type: "PodsReady", Status: metav1.ConditionFalse, Reason: "x"},
	}
	wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "mk", State: kueue.CheckStatePending, Message: "m"}}
	wl.Status.AccumulatedPastExecutionTimeSeconds = ptr.To[int32](7)
	body, err := admissionApply(wl, []string{"large"})
	if err != nil {
		t.Fatal(err)
	}
	var got kueue.Workload
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "Workload" || got.APIVersion != "kueue.x-k8s.io/v1beta2" || got.ResourceVersion != "42" || got.UID != "u1" || got.Labels["l"] != "v" {
		t.Errorf("object meta: %+v %+v", got.TypeMeta, got.ObjectMeta)
	}
	st := got.Status
	if len(st.NominatedClusterNames) != 1 || st.NominatedClusterNames[0] != "large" || st.Admission == nil || st.Admission.ClusterQueue != "cq" ||
		len(st.AdmissionChecks) != 1 || st.AdmissionChecks[0].Message != "m" || st.AccumulatedPastExecutionTimeSeconds == nil {
		t.Errorf("status: %+v", st)
	}
	if len(st.Conditions) != 1 || st.Conditions[0].Type != kueue.WorkloadQuotaReserved {
		t.Errorf("conditions: want QuotaReserved only (Kueue's admission conditions), got %+v", st.Conditions)
	}
}
