package apiserver

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/common"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	generatedopenapi "github.com/example/platform-apiserver/pkg/generated/openapi"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
)

// Extension serves kinds of platform.example.io/v1alpha1 declared outside
// this repository's API types, beside the built-in ones: a test's kind, or
// a build of the server with kinds of its own (docs/kinds.md, "A kind
// outside this repository").
type Extension struct {
	Kinds []Kind
	// AddToScheme registers the kinds' API types in the group's internal
	// version and in v1alpha1 (the same Go types may serve both).
	AddToScheme func(*runtime.Scheme) error
	// OpenAPI defines the schemas of those types, as openapi-gen would.
	OpenAPI common.GetOpenAPIDefinitions
	// Migrations make the kinds' tables: NNN_name.up.sql and .down.sql
	// files at its root, numbered apart from the registry's own, each
	// table made a view table by registry_define_view.
	Migrations fs.FS
}

// extension is what Extend added, if anything.
var extension *Extension

// Extend makes the server serve e's kinds too. Call it once, from main,
// before anything of the server is built: the scheme, the OpenAPI
// definitions (OpenAPIDefinitions) and the registry (RegistryExtension)
// take e's parts from then on.
func Extend(e Extension) error {
	if extension != nil {
		return errors.New("apiserver: Extend was called twice; pass every kind to one call")
	}
	if len(e.Kinds) == 0 || e.AddToScheme == nil || e.OpenAPI == nil || e.Migrations == nil {
		return errors.New("apiserver: an Extension needs kinds, AddToScheme, OpenAPI and Migrations")
	}
	for _, k := range e.Kinds {
		for _, s := range served {
			if s.Kind == k.Kind || s.Resource == k.Resource {
				return fmt.Errorf("apiserver: the extension's kind %s (%s) is served already", k.Kind, k.Resource)
			}
		}
	}
	if err := e.AddToScheme(Scheme); err != nil {
		return fmt.Errorf("apiserver: register the extension's types: %w", err)
	}
	if err := addFieldLabelConversions(e.Kinds); err != nil {
		return err
	}
	extension = &e
	return nil
}

// servedKinds are the built-in kinds and the extension's.
func servedKinds() []Kind {
	if extension == nil {
		return served
	}
	return slices.Concat(served, extension.Kinds)
}

// addFieldLabelConversions makes the scheme refuse with 400, before they
// reach the storage, field selectors a kind cannot select, naming those it
// can.
func addFieldLabelConversions(kinds []Kind) error {
	for _, k := range kinds {
		if err := Scheme.AddFieldLabelConversionFunc(v1alpha1.SchemeGroupVersion.WithKind(k.Kind), k.FieldLabelConversion); err != nil {
			return fmt.Errorf("apiserver: field selectors of %s: %w", k.Kind, err)
		}
	}
	return nil
}

// RegistryExtension is what the extension adds to the registry
// (postgres.Options.Extension): its kinds' views and migrations.
func RegistryExtension() postgres.Extension {
	if extension == nil {
		return postgres.Extension{}
	}
	vs := make([]views.Logged, 0, len(extension.Kinds))
	for _, k := range extension.Kinds {
		vs = append(vs, k.View)
	}
	return postgres.Extension{Views: vs, Migrations: extension.Migrations}
}

// OpenAPIDefinitions are the schemas of every type the server serves: the
// generated ones and the extension's.
func OpenAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := generatedopenapi.GetOpenAPIDefinitions(ref)
	if extension != nil {
		maps.Copy(defs, extension.OpenAPI(ref))
	}
	return defs
}
