package platform

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group served by platform-apiserver.
const GroupName = "platform.example.io"

// ClusterLabel is the label every view object carries with its member cluster id.
const ClusterLabel = GroupName + "/cluster"

// SchemeGroupVersion is the internal version of the group.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

// Kind takes an unqualified kind and returns a group-qualified GroupKind.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// Resource takes an unqualified resource and returns a group-qualified GroupResource.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers the internal types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the internal types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&ClusterCapacity{},
		&ClusterCapacityList{},
		&ClusterNamespace{},
		&ClusterNamespaceList{},
		&NodeCapacity{},
		&NodeCapacityList{},
		&UsageReport{},
		&LocalUsageReport{},
		&PlacementReport{},
		&QuotaReport{},
		&LocalQuotaReport{},
	)
	return nil
}
