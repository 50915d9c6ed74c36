// Package install registers the platform.example.io API group in a scheme.
package install

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
)

// Install registers the internal and versioned types of the group.
func Install(scheme *runtime.Scheme) {
	utilruntime.Must(platform.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(v1alpha1.SchemeGroupVersion))
}
