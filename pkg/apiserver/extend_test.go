package apiserver

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/common"

	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
)

// TestServedKindsAreInTheChangeLog: every built-in kind's view is one the
// registry's change log follows, so its watches see its changes.
func TestServedKindsAreInTheChangeLog(t *testing.T) {
	var logged []string
	for _, v := range views.InChangeLog() {
		logged = append(logged, v.Table+"/"+string(v.Kind))
	}
	for _, k := range served {
		if v := k.View.Table + "/" + string(k.View.Kind); !slices.Contains(logged, v) {
			t.Errorf("kind %s is served from view %s, which views.InChangeLog lacks (%v)", k.Kind, v, logged)
		}
		if string(k.View.Kind) != k.Kind {
			t.Errorf("kind %s is served from the view of kind %s", k.Kind, k.View.Kind)
		}
	}
}

// TestExtendRefuses: an extension without its parts, or with a kind or a
// resource already served, is refused before anything is registered.
func TestExtendRefuses(t *testing.T) {
	parts := func(kinds ...Kind) Extension {
		return Extension{Kinds: kinds, AddToScheme: func(*runtime.Scheme) error { return nil },
			OpenAPI:    func(common.ReferenceCallback) map[string]common.OpenAPIDefinition { return nil },
			Migrations: fstest.MapFS{}}
	}
	noScheme := parts(Kind{Declaration: registry.Declaration{Kind: "Gadget", Resource: "gadgets"}})
	noScheme.AddToScheme = nil
	for _, tc := range []struct {
		name string
		e    Extension
		want string
	}{
		{"no kinds", parts(), "needs kinds"},
		{"no scheme", noScheme, "AddToScheme"},
		{"a served kind", parts(Kind{Declaration: registry.Declaration{Kind: "NodeCapacity", Resource: "gadgets"}}), "NodeCapacity (gadgets) is served already"},
		{"a served resource", parts(Kind{Declaration: registry.Declaration{Kind: "Gadget", Resource: "nodecapacities"}}), "Gadget (nodecapacities) is served already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Extend(tc.e); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Extend: %v, want an error saying %q", err, tc.want)
			}
			if extension != nil || len(servedKinds()) != len(served) {
				t.Errorf("a refused extension was kept: %+v", extension)
			}
		})
	}
}
