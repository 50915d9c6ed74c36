package apiserver

import (
	"testing"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func gvk(kind string) spec.VendorExtensible {
	return spec.VendorExtensible{Extensions: spec.Extensions{gvkExtension: map[string]any{"group": "platform.example.io", "version": "v1alpha1", "kind": kind}}}
}

var fieldValidation = spec3.Parameter{ParameterProps: spec3.ParameterProps{Name: "fieldValidation", In: "query"}}

func v3Op(kind string, params ...*spec3.Parameter) *spec3.Operation {
	return &spec3.Operation{VendorExtensible: gvk(kind), OperationProps: spec3.OperationProps{Parameters: params}}
}

// TestDeclareFieldValidationV3: a create-only kind gets the PATCH kubectl
// looks for, with its POST's fieldValidation; kinds that have a PATCH, have
// no POST, or whose POST takes no fieldValidation are left as they are.
func TestDeclareFieldValidationV3(t *testing.T) {
	doc := &spec3.OpenAPI{Paths: &spec3.Paths{Paths: map[string]*spec3.Path{
		"/reports": {PathProps: spec3.PathProps{Post: v3Op("UsageReport", &fieldValidation)}},
		// As the builder writes a path with only a POST: its parameters on the path.
		"/ns/{n}/locals": {PathProps: spec3.PathProps{Post: v3Op("LocalUsageReport"), Parameters: []*spec3.Parameter{&fieldValidation}}},
		"/nodes":         {PathProps: spec3.PathProps{Get: v3Op("NodeCapacity")}},
		"/things":        {PathProps: spec3.PathProps{Post: v3Op("Thing", &fieldValidation)}},
		"/things/{name}": {PathProps: spec3.PathProps{Patch: v3Op("Thing", &fieldValidation)}},
		"/unvalidated":   {PathProps: spec3.PathProps{Post: v3Op("Unvalidated")}},
	}}}
	_, v3 := withCreateOnlyFieldValidation(nil, &common.OpenAPIV3Config{})
	if _, err := v3.PostProcessSpec(doc); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/reports": "UsageReport", "/ns/{n}/locals": "LocalUsageReport"} {
		p := doc.Paths.Paths[path].Patch
		if p == nil || gvkOf(p.Extensions) != "platform.example.io/v1alpha1/"+want || len(p.Parameters) != 1 || p.Parameters[0].Name != "fieldValidation" ||
			p.Responses.StatusCodeResponses[405] == nil || len(p.Responses.StatusCodeResponses) != 1 {
			t.Errorf("%s: PATCH %+v; want one declaring %s's fieldValidation, answering 405", path, p, want)
		}
	}
	for _, path := range []string{"/nodes", "/things", "/unvalidated"} {
		if p := doc.Paths.Paths[path].Patch; p != nil {
			t.Errorf("%s got a PATCH %+v", path, p)
		}
	}
}

func TestDeclareFieldValidationV2(t *testing.T) {
	param := spec.Parameter{ParamProps: spec.ParamProps{Name: "fieldValidation", In: "query"}}
	doc := &spec.Swagger{SwaggerProps: spec.SwaggerProps{Paths: &spec.Paths{Paths: map[string]spec.PathItem{
		"/reports": {PathItemProps: spec.PathItemProps{Post: &spec.Operation{VendorExtensible: gvk("UsageReport")}, Parameters: []spec.Parameter{param}}},
		"/nodes":   {PathItemProps: spec.PathItemProps{Get: &spec.Operation{VendorExtensible: gvk("NodeCapacity")}}},
	}}}}
	next := false
	v2, _ := withCreateOnlyFieldValidation(&common.Config{PostProcessSpec: func(s *spec.Swagger) (*spec.Swagger, error) { next = true; return s, nil }}, nil)
	if _, err := v2.PostProcessSpec(doc); err != nil || !next {
		t.Fatalf("post-processing: %v (the config's own ran: %v)", err, next)
	}
	if p := doc.Paths.Paths["/reports"].Patch; p == nil || gvkOf(p.Extensions) != "platform.example.io/v1alpha1/UsageReport" || len(p.Parameters) != 1 || p.Parameters[0].Name != "fieldValidation" {
		t.Errorf("/reports PATCH %+v; want one declaring fieldValidation", p)
	}
	if p := doc.Paths.Paths["/nodes"].Patch; p != nil {
		t.Errorf("/nodes got a PATCH %+v", p)
	}
}
