package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueuelisters "sigs.k8s.io/kueue/client-go/listers/kueue/v1beta2"
)

// MemberLabel on a MultiKueueCluster names the registry member that
// mirrors it; without it the member has the MultiKueueCluster's name.
const MemberLabel = "platform.example.io/member"

// kueueAdmissionManager is the field manager of Kueue's own writes of a
// Workload's admission status. Kueue clears status.nominatedClusterNames
// when a worker reserves by leaving it out of its server-side apply as
// this manager, which removes the field only if no other manager owns
// it: a nomination written under another manager would outlive the
// reservation and make Kueue's apply fail the Workload's rule that
// clusterName and nominatedClusterNames exclude each other. So the
// dispatcher writes its nomination as Kueue's own dispatchers do: the
// admission status apply, under this manager (see admissionApply).
const kueueAdmissionManager = "kueue-admission"

// conditionManager owns the dispatcher's own condition on Workloads.
const conditionManager = "platform-kueue-dispatcher"

// ConditionType is the dispatcher's condition on the Workloads it handles.
const ConditionType = "platform.example.io/Nominated"

// multiKueueCheck is the Workload's MultiKueue admission check state, nil
// when it has none.
func multiKueueCheck(wl *kueue.Workload, checks kueuelisters.AdmissionCheckLister) (*kueue.AdmissionCheckState, *kueue.AdmissionCheck) {
	for i := range wl.Status.AdmissionChecks {
		st := &wl.Status.AdmissionChecks[i]
		ac, err := checks.Get(string(st.Name))
		if err == nil && ac.Spec.ControllerName == kueue.MultiKueueControllerName {
			return st, ac
		}
	}
	return nil, nil
}

// candidates are the worker clusters of the check's MultiKueueConfig that
// are Active, each with its member; inactive ones are returned apart, as
// Kueue dispatches to none of them.
func candidates(ac *kueue.AdmissionCheck, configs kueuelisters.MultiKueueConfigLister, clusters kueuelisters.MultiKueueClusterLister) (active []Candidate, inactive []string, err error) {
	p := ac.Spec.Parameters
	if p == nil || p.Kind != "MultiKueueConfig" {
		return nil, nil, fmt.Errorf("admission check %s has no MultiKueueConfig parameters", ac.Name)
	}
	cfg, err := configs.Get(p.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("admission check %s: MultiKueueConfig %s: %w", ac.Name, p.Name, err)
	}
	for _, name := range cfg.Spec.Clusters {
		mkc, err := clusters.Get(name)
		if err != nil || !apimeta.IsStatusConditionTrue(mkc.Status.Conditions, kueue.MultiKueueClusterActive) {
			inactive = append(inactive, name)
			continue
		}
		active = append(active, Candidate{Cluster: name, Member: memberName(mkc)})
	}
	return active, inactive, nil
}

// memberName is the registry member that mirrors the MultiKueueCluster:
// the one its MemberLabel names, else the one of its name.
func memberName(mkc *kueue.MultiKueueCluster) string {
	if m := mkc.Labels[MemberLabel]; m != "" {
		return m
	}
	return mkc.Name
}

func quotaReserved(wl *kueue.Workload) bool {
	return wl.Status.Admission != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
}

func finished(wl *kueue.Workload) bool {
	return apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) || !wl.DeletionTimestamp.IsZero()
}

// admissionManagedConditions are the conditions Kueue's admission status
// apply carries (pkg/workload of the pinned Kueue).
var admissionManagedConditions = []string{
	kueue.WorkloadQuotaReserved,
	kueue.WorkloadBlockedOnPreemptionGates,
	kueue.WorkloadEvicted,
	kueue.WorkloadAdmitted,
	kueue.WorkloadPreempted,
	kueue.WorkloadRequeued,
}

// admissionApply is the body of Kueue's admission status apply for wl
// with nominated as its nominated clusters: the fields Kueue's own
// PrepareWorkloadPatch copies (so applying it as kueueAdmissionManager
// keeps every field Kueue owns), with the resourceVersion, so a Workload
// changed since it was read is a conflict, not overwritten.
func admissionApply(wl *kueue.Workload, nominated []string) ([]byte, error) {
	out := &kueue.Workload{
		TypeMeta: metav1.TypeMeta{APIVersion: kueue.GroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{
			UID: wl.UID, Name: wl.Name, Namespace: wl.Namespace, Generation: wl.Generation,
			Annotations: maps.Clone(wl.Annotations), Labels: maps.Clone(wl.Labels),
			ResourceVersion: wl.ResourceVersion,
		},
	}
	st, in := &out.Status, &wl.Status
	st.Admission = in.Admission.DeepCopy()
	if rs := in.RequeueState; rs != nil && (rs.Count != nil || rs.RequeueAt != nil) {
		st.RequeueState = rs.DeepCopy()
	}
	if st.Admission != nil {
		st.ResourceRequests = []kueue.PodSetRequest{}
	} else {
		for _, rr := range in.ResourceRequests {
			st.ResourceRequests = append(st.ResourceRequests, *rr.DeepCopy())
		}
	}
	for _, t := range admissionManagedConditions {
		if c := apimeta.FindStatusCondition(in.Conditions, t); c != nil {
			st.Conditions = append(st.Conditions, *c.DeepCopy())
		}
	}
	st.AccumulatedPastExecutionTimeSeconds = in.AccumulatedPastExecutionTimeSeconds
	if in.SchedulingStats != nil {
		st.SchedulingStats = &kueue.SchedulingStats{Evictions: slices.Clone(in.SchedulingStats.Evictions)}
	}
	st.ClusterName = in.ClusterName
	st.NominatedClusterNames = nominated
	st.UnhealthyNodes = in.UnhealthyNodes
	st.PreemptionGates = in.PreemptionGates
	if in.AdmissionChecks != nil {
		st.AdmissionChecks = make([]kueue.AdmissionCheckState, 0, len(in.AdmissionChecks))
		for _, ac := range in.AdmissionChecks {
			st.AdmissionChecks = append(st.AdmissionChecks, *ac.DeepCopy())
		}
	}
	return json.Marshal(out)
}

// nominate writes the Workload's nominated clusters.
func nominate(ctx context.Context, c kueueclient.Interface, wl *kueue.Workload, clusters []string) error {
	body, err := admissionApply(wl, clusters)
	if err != nil {
		return err
	}
	_, err = c.KueueV1beta2().Workloads(wl.Namespace).Patch(ctx, wl.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: kueueAdmissionManager, Force: new(true)}, "status")
	return err
}

// setCondition applies the dispatcher's condition, under its own field
// manager, unless the Workload already has it as given.
func setCondition(ctx context.Context, c kueueclient.Interface, wl *kueue.Workload, status metav1.ConditionStatus, reason, message string) error {
	if len(message) > 32768 {
		message = message[:32765] + "..."
	}
	old := apimeta.FindStatusCondition(wl.Status.Conditions, ConditionType)
	if old != nil && old.Status == status && old.Reason == reason && old.Message == message {
		return nil
	}
	cond := metav1.Condition{Type: ConditionType, Status: status, Reason: reason, Message: message,
		ObservedGeneration: wl.Generation, LastTransitionTime: metav1.Now()}
	if old != nil && old.Status == status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": kueue.GroupVersion.String(), "kind": "Workload",
		"metadata": map[string]any{"name": wl.Name, "namespace": wl.Namespace, "uid": wl.UID},
		"status":   map[string]any{"conditions": []metav1.Condition{cond}},
	})
	if err != nil {
		return err
	}
	_, err = c.KueueV1beta2().Workloads(wl.Namespace).Patch(ctx, wl.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: conditionManager, Force: new(true)}, "status")
	return err
}
