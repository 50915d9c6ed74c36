package apiserver

import (
	"slices"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// kubectl's default validation (--validate=strict) asks the server to
// validate fields (fieldValidation=Strict) only for a kind whose OpenAPI
// document has a PATCH operation, tagged with the kind's
// x-kubernetes-group-version-kind, that takes the query parameter
// fieldValidation (k8s.io/cli-runtime/pkg/resource, query_param_verifier_v3.go,
// then the v2 document in query_param_verifier.go; kubectl 1.32 to 1.37).
// Without one it takes the kind for a CRD's and lists
// customresourcedefinitions to make sure — which a tenant may not: `kubectl
// create -f` then fails with "failed to check CRD: ... forbidden".
//
// A create-only kind (UsageReport, LocalUsageReport) has no PATCH, though its
// create validates fields server-side as every kind's does (its POST takes
// fieldValidation; unknown or duplicate fields are refused with Strict). So
// the documents say so where kubectl looks: each such kind's collection path
// gets a PATCH operation with the kind's GVK and the POST's own
// fieldValidation parameter (the path's, where the builder put it), whose description and only response say it is
// not served (405 Method Not Allowed, as it answers). Then kubectl sends
// fieldValidation=Strict with the create and the server validates: nothing
// is weakened, and no CRD is listed.
const undeclaredPatch = "Not served: this kind is create-only and PATCH answers 405 Method Not Allowed. " +
	"Declared so that kubectl, which looks for fieldValidation on a kind's PATCH, knows that the server validates " +
	"the fields of a create (POST with fieldValidation) and does not list CustomResourceDefinitions to decide."

const gvkExtension = "x-kubernetes-group-version-kind"

// withCreateOnlyFieldValidation returns copies of the OpenAPI configs whose
// documents declare server-side field validation of create-only kinds where
// kubectl looks for it (see undeclaredPatch).
func withCreateOnlyFieldValidation(v2 *common.Config, v3 *common.OpenAPIV3Config) (*common.Config, *common.OpenAPIV3Config) {
	if v2 != nil {
		c := *v2
		next := c.PostProcessSpec
		c.PostProcessSpec = func(s *spec.Swagger) (*spec.Swagger, error) {
			if next != nil {
				var err error
				if s, err = next(s); err != nil {
					return nil, err
				}
			}
			declareFieldValidationV2(s)
			return s, nil
		}
		v2 = &c
	}
	if v3 != nil {
		c := *v3
		next := c.PostProcessSpec
		c.PostProcessSpec = func(s *spec3.OpenAPI) (*spec3.OpenAPI, error) {
			if next != nil {
				var err error
				if s, err = next(s); err != nil {
					return nil, err
				}
			}
			declareFieldValidationV3(s)
			return s, nil
		}
		v3 = &c
	}
	return v2, v3
}

// gvkOf is an operation's x-kubernetes-group-version-kind, "" without one.
func gvkOf(ext spec.Extensions) string {
	var gvk map[string]string
	if err := ext.GetObject(gvkExtension, &gvk); err != nil || gvk == nil {
		return ""
	}
	return gvk["group"] + "/" + gvk["version"] + "/" + gvk["kind"]
}

func declareFieldValidationV3(s *spec3.OpenAPI) {
	if s == nil || s.Paths == nil {
		return
	}
	patched := map[string]bool{}
	for _, p := range s.Paths.Paths {
		if p != nil && p.Patch != nil {
			patched[gvkOf(p.Patch.Extensions)] = true
		}
	}
	for _, p := range s.Paths.Paths {
		if p == nil || p.Post == nil || p.Patch != nil {
			continue
		}
		gvk := gvkOf(p.Post.Extensions)
		if gvk == "" || patched[gvk] {
			continue
		}
		// The builder moves the parameters every operation of a path takes
		// (all of them, for a path with only a POST) to the path; kubectl
		// reads the operation's.
		for _, param := range append(slices.Clone(p.Post.Parameters), p.Parameters...) {
			if param != nil && param.Name == "fieldValidation" && param.In == "query" {
				p.Patch = &spec3.Operation{
					VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{gvkExtension: p.Post.Extensions[gvkExtension]}},
					OperationProps: spec3.OperationProps{
						Tags: p.Post.Tags, Description: undeclaredPatch, Parameters: []*spec3.Parameter{param},
						Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
							405: {ResponseProps: spec3.ResponseProps{Description: "Method Not Allowed"}},
						}}},
					},
				}
				patched[gvk] = true
				break
			}
		}
	}
}

func declareFieldValidationV2(s *spec.Swagger) {
	if s == nil || s.Paths == nil {
		return
	}
	patched := map[string]bool{}
	for _, p := range s.Paths.Paths {
		if p.Patch != nil {
			patched[gvkOf(p.Patch.Extensions)] = true
		}
	}
	for path, p := range s.Paths.Paths {
		if p.Post == nil || p.Patch != nil {
			continue
		}
		gvk := gvkOf(p.Post.Extensions)
		if gvk == "" || patched[gvk] {
			continue
		}
		for _, param := range append(slices.Clone(p.Post.Parameters), p.Parameters...) {
			if param.Name == "fieldValidation" && param.In == "query" {
				p.Patch = &spec.Operation{
					VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{gvkExtension: p.Post.Extensions[gvkExtension]}},
					OperationProps: spec.OperationProps{
						Tags: p.Post.Tags, Description: undeclaredPatch, Parameters: []spec.Parameter{param},
						Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
							405: {ResponseProps: spec.ResponseProps{Description: "Method Not Allowed"}},
						}}},
					},
				}
				s.Paths.Paths[path] = p
				patched[gvk] = true
				break
			}
		}
	}
}
