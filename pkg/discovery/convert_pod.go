package discovery

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// convertPod records what requests and counts need of a member pod. ok is
// false for a terminal pod (Succeeded or Failed), whose row must be deleted:
// it no longer holds resources on its node.
func convertPod(p *corev1.Pod) (rec store.Pod, ok bool, issues []issue) {
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return store.Pod{}, false, nil
	case corev1.PodPending, corev1.PodRunning, corev1.PodUnknown, "":
	default:
		issues = append(issues, issue{Field: "status.phase", Value: string(p.Status.Phase), Reason: "unknown pod phase, counted as non-terminal"})
	}
	// The scheduler's own sum: containers plus sidecars, the largest init
	// container if that is more, pod-level requests when set, and overhead;
	// allocated resources of in-place resized containers.
	requests := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{UseStatusResources: true})
	var q quantities
	rec = store.Pod{
		Namespace:          p.Namespace,
		Name:               p.Name,
		UID:                string(p.UID),
		NodeName:           p.Spec.NodeName,
		Phase:              string(p.Status.Phase),
		CPURequestMillis:   q.milli("requests", requests, corev1.ResourceCPU),
		MemoryRequestBytes: q.value("requests", requests, corev1.ResourceMemory),
		OtherRequests:      q.others("requests", requests),
	}
	return rec, true, append(issues, q.issues...)
}
