// Package gadget is a kind declared outside the server's API types, to
// prove in tests what a new kind costs (docs/kinds.md): this package's
// three files (its API types, its registry view, its declaration), one
// migration, and a main that serves it (gadget/apiserver) — through the
// aggregator with kubectl (TestAKindOfFourFiles) and from the registry
// (postgres.TestViewDeclaredOnce).
package gadget

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
)

// Gadget is a member's gadget, named <cluster id>.<gadget name>. The same
// type serves the group's internal version and v1alpha1.
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Status            GadgetStatus `json:"status"`
}

// GadgetStatus is a gadget as the registry last observed it.
type GadgetStatus struct {
	// Cluster is the member's id.
	Cluster string `json:"cluster"`
	// Color is the gadget's color.
	Color string `json:"color"`
}

// GadgetList is a list of gadgets.
type GadgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []Gadget `json:"items"`
}

// DeepCopyObject copies the gadget; only its metadata holds references.
func (g *Gadget) DeepCopyObject() runtime.Object {
	c := *g
	g.ObjectMeta.DeepCopyInto(&c.ObjectMeta) //nolint:staticcheck // QF1008: copies the metadata only
	return &c
}

// DeepCopyObject copies the list and its gadgets.
func (l *GadgetList) DeepCopyObject() runtime.Object {
	c := *l
	l.ListMeta.DeepCopyInto(&c.ListMeta) //nolint:staticcheck // QF1008: copies the list metadata only
	c.Items = make([]Gadget, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*Gadget)
	}
	return &c
}

// AddToScheme registers Gadget and GadgetList in platform.example.io's
// internal version and in v1alpha1.
func AddToScheme(s *runtime.Scheme) error {
	for _, gv := range []schema.GroupVersion{{Group: platform.GroupName, Version: runtime.APIVersionInternal}, v1alpha1.SchemeGroupVersion} {
		s.AddKnownTypes(gv, &Gadget{}, &GadgetList{})
	}
	return nil
}

// OpenAPIModelName names the type's schema in the OpenAPI documents, as
// openapi-gen names the group's others.
func (Gadget) OpenAPIModelName() string { return "io.example.platform.v1alpha1.Gadget" }

// OpenAPIModelName names the type's schema in the OpenAPI documents.
func (GadgetStatus) OpenAPIModelName() string { return "io.example.platform.v1alpha1.GadgetStatus" }

// OpenAPIModelName names the type's schema in the OpenAPI documents.
func (GadgetList) OpenAPIModelName() string { return "io.example.platform.v1alpha1.GadgetList" }

// OpenAPI defines the types' schemas, as openapi-gen would.
func OpenAPI(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	str := func(description string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: description, Type: []string{"string"}, Default: ""}}
	}
	object := func(description string, props map[string]spec.Schema, required []string, deps ...string) common.OpenAPIDefinition {
		return common.OpenAPIDefinition{Schema: spec.Schema{SchemaProps: spec.SchemaProps{
			Description: description, Type: []string{"object"}, Properties: props, Required: required,
		}}, Dependencies: deps}
	}
	refTo := func(description, to string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: description, Default: map[string]any{}, Ref: ref(to)}}
	}
	objectMeta, listMeta := metav1.ObjectMeta{}.OpenAPIModelName(), metav1.ListMeta{}.OpenAPIModelName()
	gadget, status, list := Gadget{}.OpenAPIModelName(), GadgetStatus{}.OpenAPIModelName(), GadgetList{}.OpenAPIModelName()
	typeMeta := map[string]spec.Schema{"kind": str("Kind of the object."), "apiVersion": str("APIVersion of the object.")}
	with := func(m map[string]spec.Schema) map[string]spec.Schema {
		maps.Copy(m, typeMeta)
		return m
	}
	return map[string]common.OpenAPIDefinition{
		gadget: object("Gadget is a member's gadget, named <cluster id>.<gadget name>.", with(map[string]spec.Schema{
			"metadata": refTo("Standard object metadata.", objectMeta),
			"status":   refTo("Status is the gadget as last observed.", status),
		}), []string{"status"}, objectMeta, status),
		status: object("GadgetStatus is a gadget as the registry last observed it.", map[string]spec.Schema{
			"cluster": str("Cluster is the member's id."),
			"color":   str("Color is the gadget's color."),
		}, []string{"cluster", "color"}),
		list: object("GadgetList is a list of gadgets.", with(map[string]spec.Schema{
			"metadata": refTo("Standard list metadata.", listMeta),
			"items": {SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{
				Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Default: map[string]any{}, Ref: ref(gadget)}}}}},
		}), []string{"items"}, listMeta, gadget),
	}
}
