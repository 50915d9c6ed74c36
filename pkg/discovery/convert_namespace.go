package discovery

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// convertNamespace records a member namespace.
func convertNamespace(ns *corev1.Namespace) (store.Namespace, []issue) {
	var issues []issue
	phase := string(ns.Status.Phase)
	switch ns.Status.Phase {
	case corev1.NamespaceActive, corev1.NamespaceTerminating:
	case "":
		phase = string(corev1.NamespaceActive) // as the API server defaults it
	default:
		issues = append(issues, issue{Field: "status.phase", Value: phase, Reason: "unknown namespace phase, kept as is"})
	}
	return store.Namespace{
		Name:      ns.Name,
		UID:       string(ns.UID),
		Labels:    ns.Labels,
		CreatedAt: ns.CreationTimestamp.Time,
		Phase:     phase,
	}, issues
}
