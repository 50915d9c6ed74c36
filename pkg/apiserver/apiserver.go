// Package apiserver assembles the platform.example.io aggregated API server:
// the generic k8s.io/apiserver machinery with the registry's REST storages and
// a readiness check on the registry database.
package apiserver

import (
	"context"
	"net/http"

	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry/clusternamespace"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
)

// Registry is what the server reads from and checks readiness against.
type Registry interface {
	clusternamespace.Reader
	nodecapacity.Reader
	// Ready fails while the database is unreachable or migrations are pending.
	Ready(ctx context.Context) error
}

// Config is the server's configuration.
type Config struct {
	Generic  *genericapiserver.RecommendedConfig
	Registry Registry
}

type completedConfig struct {
	generic  genericapiserver.CompletedConfig
	registry Registry
}

// CompletedConfig is a Config with defaults filled in, ready for New.
type CompletedConfig struct {
	*completedConfig
}

// Server is the platform.example.io API server.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

// Complete fills in defaults and adds the registry readiness check.
func (c *Config) Complete() CompletedConfig {
	c.Generic.AddReadyzChecks(healthz.NamedCheck("registry", func(r *http.Request) error {
		return c.Registry.Ready(r.Context())
	}))
	return CompletedConfig{&completedConfig{
		generic:  c.Generic.Complete(),
		registry: c.Registry,
	}}
}

// New returns a server serving the platform.example.io group.
func (c CompletedConfig) New() (*Server, error) {
	generic, err := c.generic.New("platform-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(platform.GroupName, Scheme, metav1ParameterCodec, Codecs)
	group.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"clusternamespaces": clusternamespace.NewREST(c.registry),
		"nodecapacities":    nodecapacity.NewREST(c.registry),
	}
	if err := generic.InstallAPIGroup(&group); err != nil {
		return nil, err
	}
	return &Server{GenericAPIServer: generic}, nil
}
