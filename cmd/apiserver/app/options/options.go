// Package options holds platform-apiserver's command-line options: the
// k8s.io/apiserver option pieces a delegating aggregated server needs (no
// etcd: the registry is PostgreSQL) and the registry database block.
package options

import (
	"context"
	"fmt"
	"net"

	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	netutils "k8s.io/utils/net"

	"github.com/example/platform-apiserver/pkg/apiserver"
)

// Options are all of platform-apiserver's flags.
type Options struct {
	ServerRun      *genericoptions.ServerRunOptions
	SecureServing  *genericoptions.SecureServingOptionsWithLoopback
	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions
	Audit          *genericoptions.AuditOptions
	Features       *genericoptions.FeatureOptions
	Logging        *logs.Options
	Postgres       *PostgresOptions
	Watch          *WatchOptions
	Limits         *LimitsOptions
	Quota          *QuotaOptions
	Discovery      *DiscoveryOptions
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	o := &Options{
		ServerRun:      genericoptions.NewServerRunOptions(),
		SecureServing:  genericoptions.NewSecureServingOptions().WithLoopback(),
		Authentication: genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:  genericoptions.NewDelegatingAuthorizationOptions(),
		Audit:          genericoptions.NewAuditOptions(),
		Features:       genericoptions.NewFeatureOptions(),
		Logging:        logs.NewOptions(),
		Postgres:       NewPostgresOptions(),
		Watch:          NewWatchOptions(),
		Limits:         NewLimitsOptions(),
		Quota:          NewQuotaOptions(),
		Discovery:      NewDiscoveryOptions(),
	}
	o.SecureServing.BindPort = 6443
	o.ServerRun.MaxRequestsInFlight = defaultMaxRequestsInFlight
	o.ServerRun.MaxMutatingRequestsInFlight = defaultMaxMutatingRequestsInFlight
	return o
}

// Flags returns the flags in named sections, for help output.
func (o *Options) Flags() (fss cliflag.NamedFlagSets) {
	o.Postgres.AddFlags(fss.FlagSet("registry database"))
	o.Watch.AddFlags(fss.FlagSet("watch"))
	o.Limits.AddFlags(fss.FlagSet("request limits"))
	o.Quota.AddFlags(fss.FlagSet("quota policy"))
	o.Discovery.AddFlags(fss.FlagSet("discovery"))
	o.ServerRun.AddUniversalFlags(fss.FlagSet("generic"))
	o.SecureServing.AddFlags(fss.FlagSet("secure serving"))
	o.Authentication.AddFlags(fss.FlagSet("delegated authentication"))
	o.Authorization.AddFlags(fss.FlagSet("delegated authorization"))
	o.Audit.AddFlags(fss.FlagSet("audit log"))
	o.Features.AddFlags(fss.FlagSet("features"))
	logsapi.AddFlags(o.Logging, fss.FlagSet("logging"))
	return fss
}

// Validate returns every problem with the options, not just the first.
func (o *Options) Validate() []error {
	var errs []error
	errs = append(errs, o.ServerRun.Validate()...)
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	errs = append(errs, o.Audit.Validate()...)
	errs = append(errs, o.Features.Validate()...)
	errs = append(errs, o.validateFeatures()...)
	errs = append(errs, o.Postgres.Validate()...)
	errs = append(errs, o.Watch.Validate()...)
	errs = append(errs, o.Limits.Validate()...)
	errs = append(errs, o.Quota.Validate()...)
	errs = append(errs, o.Discovery.Validate()...)
	if err := logsapi.ValidateAndApply(o.Logging, nil); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// Config applies the options to the server's configuration; Validate
// must have passed. ctx carries the logger.
func (o *Options) Config(ctx context.Context) (*apiserver.Config, error) {
	generic, err := o.genericConfig(ctx)
	if err != nil {
		return nil, err
	}
	c := &apiserver.Config{Generic: generic}
	o.Postgres.ApplyTo(&c.Registry)
	c.Registry.UsageRetention = o.Discovery.Config.Metrics.Retention
	o.Watch.ApplyTo(&c.Watch)
	o.Limits.ApplyTo(&c.Limits)
	o.Quota.ApplyTo(&c.QuotaPolicy)
	if err := o.Discovery.ApplyTo(ctx, &c.Discovery); err != nil {
		return nil, err
	}
	return c, nil
}

// genericConfig builds the generic API server configuration: serving,
// delegated authentication and authorization, audit, OpenAPI v2 and v3,
// profiling and priority and fairness (features.go).
func (o *Options) genericConfig(ctx context.Context) (*genericapiserver.RecommendedConfig, error) {
	// Without --tls-cert-file the server makes a self-signed certificate,
	// good for a first try but not for an APIService with a caBundle.
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}
	config := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
	if err := o.ServerRun.ApplyTo(&config.Config); err != nil {
		return nil, err
	}

	if err := o.SecureServing.ApplyTo(&config.SecureServing, &config.LoopbackClientConfig); err != nil {
		return nil, err
	}
	namer := openapinamer.NewDefinitionNamer(apiserver.Scheme)
	config.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(apiserver.OpenAPIDefinitions, namer)
	config.OpenAPIConfig.Info.Title = "platform.example.io"
	config.OpenAPIConfig.Info.Version = "v1alpha1"
	config.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(apiserver.OpenAPIDefinitions, namer)
	config.OpenAPIV3Config.Info.Title = "platform.example.io"
	config.OpenAPIV3Config.Info.Version = "v1alpha1"

	if err := o.Authentication.ApplyTo(&config.Authentication, config.SecureServing, config.OpenAPIConfig); err != nil {
		return nil, err
	}
	if err := o.Authorization.ApplyTo(&config.Authorization); err != nil {
		return nil, err
	}
	if err := o.Audit.ApplyTo(&config.Config); err != nil {
		return nil, err
	}
	if err := o.applyFeatures(ctx, config); err != nil {
		return nil, err
	}
	return config, nil
}
