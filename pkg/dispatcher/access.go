package dispatcher

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Permission is one thing the dispatcher must be allowed to do.
type Permission struct {
	Verb, Group, Resource, Subresource string
}

func (p Permission) String() string {
	r := p.Resource
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	if p.Group != "" {
		r += "." + p.Group
	}
	return p.Verb + " " + r
}

// ManagerPermissions are what the dispatcher does in Kueue's manager
// cluster: watch Workloads and the MultiKueue objects, write Workloads'
// status and record events.
var ManagerPermissions = []Permission{
	{"list", "kueue.x-k8s.io", "workloads", ""},
	{"watch", "kueue.x-k8s.io", "workloads", ""},
	{"patch", "kueue.x-k8s.io", "workloads", "status"},
	{"list", "kueue.x-k8s.io", "admissionchecks", ""},
	{"watch", "kueue.x-k8s.io", "admissionchecks", ""},
	{"list", "kueue.x-k8s.io", "multikueueconfigs", ""},
	{"watch", "kueue.x-k8s.io", "multikueueconfigs", ""},
	{"list", "kueue.x-k8s.io", "multikueueclusters", ""},
	{"watch", "kueue.x-k8s.io", "multikueueclusters", ""},
	{"create", "", "events", ""},
	// A pod set's resource claims: their templates and device classes.
	{"get", "resource.k8s.io", "resourceclaimtemplates", ""},
	{"get", "resource.k8s.io", "deviceclasses", ""},
}

// PlatformPermissions are what it asks the platform API.
var PlatformPermissions = []Permission{
	{"create", "platform.example.io", "placementreports", ""},
	{"get", "platform.example.io", "clustercapacities", ""},
	// Each member's free room, watched.
	{"list", "platform.example.io", "clustercapacities", ""},
	{"watch", "platform.example.io", "clustercapacities", ""},
	// A PlacementReport asking about nodes (selectors, affinity,
	// tolerations, spread, devices) needs it too (docs/placement.md).
	{"list", "platform.example.io", "nodecapacities", ""},
}

// CheckAccess asks, with SelfSubjectAccessReviews, whether the caller may
// do each of perms cluster-wide, and names every one it may not.
func CheckAccess(ctx context.Context, reviews authorizationclient.SelfSubjectAccessReviewInterface, where string, perms []Permission) error {
	var missing []string
	for _, p := range perms {
		r, err := reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource},
		}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("check access in %s: %w", where, err)
		}
		if !r.Status.Allowed {
			missing = append(missing, p.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the dispatcher's identity may not, in %s: %s (bind the platform-kueue-dispatcher ClusterRole of artifacts/kustomize/components/kueue-dispatcher to it)",
			where, strings.Join(missing, ", "))
	}
	return nil
}
