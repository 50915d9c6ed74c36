package quotareport

import (
	"context"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry"
)

// authorize asks what the answer reveals: each member's committed quota,
// allocatable and requests are its ClusterCapacity's (get on each member
// named; list to answer for every member), and the namespace's quotas and
// usage there its ClusterNamespace's (get on it in each member named; list
// in the namespace for every member). RBAC's create on the report's kind
// only lets a user ask. A verdict alone would tell, question by question,
// how much a member has left: so it is no less guarded than the numbers.
func (a *answerer) authorize(ctx context.Context, q question) error {
	attrs := func(verb, resource, namespace, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{Verb: verb, APIGroup: platform.GroupName, APIVersion: v1alpha1.SchemeGroupVersion.Version,
			Resource: resource, Namespace: namespace, Name: name, ResourceRequest: true}
	}
	ns := q.spec.Namespace
	if len(q.spec.Clusters) == 0 {
		if err := registry.AuthorizeQuestion(ctx, a.authz, attrs("list", "clustercapacities", "", ""), q.resource, q.name,
			"a quota report for every member (name members in spec.clusters to need get on theirs only)"); err != nil {
			return err
		}
		return registry.AuthorizeQuestion(ctx, a.authz, attrs("list", "clusternamespaces", ns, ""), q.resource, q.name,
			"a quota report of namespace "+ns+" in every member")
	}
	for _, c := range q.spec.Clusters {
		if err := registry.AuthorizeQuestion(ctx, a.authz, attrs("get", "clustercapacities", "", c), q.resource, q.name,
			"a quota report on member "+c); err != nil {
			return err
		}
		if err := registry.AuthorizeQuestion(ctx, a.authz, attrs("get", "clusternamespaces", ns, c), q.resource, q.name,
			"a quota report of namespace "+ns+" in member "+c); err != nil {
			return err
		}
	}
	return nil
}
