package options

import (
	"github.com/spf13/pflag"

	"github.com/example/platform-apiserver/pkg/registry/quotareport"
)

// QuotaOptions set the overcommit policy QuotaReports judge proposed
// quotas by.
type QuotaOptions struct {
	MaxOvercommit map[string]int64
}

// NewQuotaOptions returns the defaults: no bound beyond the policy's
// own (requests and pods at 100 %, limits unbounded).
func NewQuotaOptions() *QuotaOptions {
	return &QuotaOptions{MaxOvercommit: map[string]int64{}}
}

// AddFlags adds the quota policy flag.
func (o *QuotaOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringToInt64Var(&o.MaxOvercommit, "quota-max-overcommit", o.MaxOvercommit, ""+
		"The most a member's ResourceQuotas may commit per resource, in percent of its schedulable nodes' allocatable, "+
		"for a QuotaReport to judge a proposed quota Fits: e.g. requests.cpu=150,requests.memory=100,limits.cpu=400. "+
		"Resources not named: pods and requests.<resource> at 100 (no overcommit), limits.<resource> unbounded.")
}

// Validate returns every problem with the options.
func (o *QuotaOptions) Validate() []error {
	return quotareport.ValidatePolicy(o.MaxOvercommit)
}

// ApplyTo sets the server's policy.
func (o *QuotaOptions) ApplyTo(p *quotareport.Policy) {
	*p = quotareport.Policy(o.MaxOvercommit)
}
