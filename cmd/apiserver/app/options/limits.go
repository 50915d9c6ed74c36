package options

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/example/platform-apiserver/pkg/registry"
)

// LimitsOptions bound what one request may ask of the registry; the flags
// set the server's registry.Limits.
type LimitsOptions struct {
	registry.Limits
}

// NewLimitsOptions returns the defaults (registry.DefaultLimits).
func NewLimitsOptions() *LimitsOptions {
	return &LimitsOptions{Limits: registry.DefaultLimits()}
}

// AddFlags adds the request limit flags.
func (o *LimitsOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.SelectorRequirements, "max-selector-requirements", o.SelectorRequirements,
		"The most requirements one label selector, and one field selector, of a list, watch or UsageReport may have; more are refused with 400.")
	fs.IntVar(&o.SelectorValues, "max-selector-values", o.SelectorValues,
		"The most values one in or notin requirement of a label selector may list; more are refused with 400.")
	fs.IntVar(&o.SelectorBytes, "max-selector-bytes", o.SelectorBytes,
		"The most bytes the label and field selectors of one request may have together; more are refused with 400.")
	fs.Int64Var(&o.PageSize, "max-list-page-size", o.PageSize,
		"The most items one page of a list holds: a list asking a larger limit gets this many and a continue token (limit=0 still lists everything).")
	fs.IntVar(&o.QueryAffinityTerms, "max-query-affinity-terms", o.QueryAffinityTerms,
		"The most node affinity terms one PlacementReport may have; more are refused with 400.")
	fs.IntVar(&o.QueryTolerations, "max-query-tolerations", o.QueryTolerations,
		"The most tolerations one PlacementReport may have; more are refused with 400.")
	fs.IntVar(&o.QueryResources, "max-query-resources", o.QueryResources,
		"The most requested resources, and the most device requests, one PlacementReport may have; more are refused with 400.")
	fs.IntVar(&o.QueryClusters, "max-query-clusters", o.QueryClusters,
		"The most members one PlacementReport may name in spec.clusters; more are refused with 400 (a clusterSelector, or none, asks about any number).")
}

// Validate returns every problem with the options.
func (o *LimitsOptions) Validate() []error {
	var errs []error
	for _, f := range []struct {
		name     string
		value    int64
		min      int64
		whyLower string
	}{
		{"--max-selector-requirements", int64(o.SelectorRequirements), 1, ""},
		{"--max-selector-values", int64(o.SelectorValues), 1, ""},
		// One requirement at the longest a label may be (a 317-byte key, a 63-byte value).
		{"--max-selector-bytes", int64(o.SelectorBytes), 1024, " (a selector of one longest label needs about 400)"},
		{"--max-list-page-size", o.PageSize, 1, ""},
		{"--max-query-affinity-terms", int64(o.QueryAffinityTerms), 1, ""},
		{"--max-query-tolerations", int64(o.QueryTolerations), 1, ""},
		{"--max-query-resources", int64(o.QueryResources), 2, " (a pod shape asks for cpu and memory)"},
		{"--max-query-clusters", int64(o.QueryClusters), 1, ""},
	} {
		if f.value < f.min {
			errs = append(errs, fmt.Errorf("%s must be at least %d%s, got %d", f.name, f.min, f.whyLower, f.value))
		}
	}
	return errs
}

// ApplyTo sets the server's request limits.
func (o *LimitsOptions) ApplyTo(l *registry.Limits) {
	*l = o.Limits
}
