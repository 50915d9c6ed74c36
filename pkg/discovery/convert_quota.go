package discovery

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// convertQuota records a member ResourceQuota's hard and used amounts as
// canonical quantity strings. Hard is the enforced status.hard, or spec.hard
// until the quota controller has filled it in.
func convertQuota(rq *corev1.ResourceQuota) store.Quota {
	hard := rq.Status.Hard
	if len(hard) == 0 {
		hard = rq.Spec.Hard
	}
	return store.Quota{
		Namespace: rq.Namespace,
		Name:      rq.Name,
		Hard:      quantityStrings(hard),
		Used:      quantityStrings(rq.Status.Used),
	}
}

func quantityStrings(list corev1.ResourceList) map[string]string {
	if len(list) == 0 {
		return nil
	}
	out := make(map[string]string, len(list))
	for name, q := range list {
		out[string(name)] = q.String()
	}
	return out
}
