package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/example/platform-apiserver/pkg/apis/platform/install"
)

var (
	// Scheme holds the platform.example.io types and the meta types the
	// generic API server needs.
	Scheme = runtime.NewScheme()
	// Codecs encodes and decodes objects of Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	install.Install(Scheme)
	utilruntime.Must(addFieldLabelConversions(served))

	// Options and status types the generic server decodes in every group.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
}

// metav1ParameterCodec decodes query parameters into option structs.
var metav1ParameterCodec = runtime.NewParameterCodec(Scheme)
