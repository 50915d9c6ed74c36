package discovery

import (
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// convertResourceSlice records what device counts need of a member
// ResourceSlice (resource.k8s.io/v1): its node when its devices are local
// to one (spec.nodeName), its driver and pool with the pool's generation,
// and its devices' names. Devices of a slice for several nodes
// (spec.allNodes, spec.nodeSelector) or with a node per device
// (spec.perDeviceNodeSelection) count for the member, not for a node.
func convertResourceSlice(s *resourcev1.ResourceSlice) (store.ResourceSlice, []issue) {
	var issues []issue
	rec := store.ResourceSlice{
		Name:           s.Name,
		Driver:         s.Spec.Driver,
		Pool:           s.Spec.Pool.Name,
		PoolGeneration: s.Spec.Pool.Generation,
	}
	switch {
	case s.Spec.NodeName != nil && *s.Spec.NodeName != "":
		rec.NodeName = *s.Spec.NodeName
	case isTrue(s.Spec.AllNodes), s.Spec.NodeSelector != nil, isTrue(s.Spec.PerDeviceNodeSelection):
	default:
		// A node selection newer than the API types discovery is built
		// with (its field is dropped when decoding), or an empty nodeName.
		issues = append(issues, issue{Field: "spec.nodeName", Value: "",
			Reason: "no node selection this version knows (nodeName, nodeSelector, allNodes, perDeviceNodeSelection); devices counted for the member, not a node"})
	}
	if len(s.Spec.Devices) > 0 {
		rec.Devices = make([]string, 0, len(s.Spec.Devices))
		for _, d := range s.Spec.Devices {
			rec.Devices = append(rec.Devices, d.Name)
		}
	}
	return rec, issues
}

func isTrue(b *bool) bool { return b != nil && *b }
