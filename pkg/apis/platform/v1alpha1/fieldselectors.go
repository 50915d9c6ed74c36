package v1alpha1

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// Field selector paths the registry can evaluate, per kind.
var (
	ClusterNamespaceFieldSelectors = []string{"metadata.name", "metadata.namespace", "status.cluster", "status.phase"}
	NodeCapacityFieldSelectors     = []string{"metadata.name", "status.cluster", "status.nodeName", "status.schedulable"}
)

// addFieldLabelConversions makes the API server reject, with 400 Bad Request,
// any field selector the registry cannot evaluate, naming the supported ones.
func addFieldLabelConversions(scheme *runtime.Scheme) error {
	for kind, supported := range map[string][]string{
		"ClusterNamespace": ClusterNamespaceFieldSelectors,
		"NodeCapacity":     NodeCapacityFieldSelectors,
	} {
		if err := scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind(kind), fieldLabelConversion(kind, supported)); err != nil {
			return err
		}
	}
	return nil
}

func fieldLabelConversion(kind string, supported []string) runtime.FieldLabelConversionFunc {
	return func(label, value string) (string, string, error) {
		if slices.Contains(supported, label) {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label %q is not supported for %s; supported field selectors: %s",
			label, kind, strings.Join(supported, ", "))
	}
}
