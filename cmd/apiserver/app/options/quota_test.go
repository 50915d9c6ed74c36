package options

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/example/platform-apiserver/pkg/registry/quotareport"
)

// TestQuotaMaxOvercommitFlag: --quota-max-overcommit sets the policy;
// a resource quotas do not limit on pods, a synonym (cpu), or a bound out
// of 1–100000 is refused naming the flag and saying what it takes.
func TestQuotaMaxOvercommitFlag(t *testing.T) {
	parse := func(args ...string) *QuotaOptions {
		t.Helper()
		o := NewQuotaOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := parse("--quota-max-overcommit=requests.cpu=150,limits.memory=400")
	var p quotareport.Policy
	o.ApplyTo(&p)
	if errs := o.Validate(); len(errs) > 0 || p["requests.cpu"] != 150 || p["limits.memory"] != 400 || len(p) != 2 {
		t.Errorf("policy %v, errors %v; want requests.cpu 150 and limits.memory 400", p, errs)
	}
	for arg, want := range map[string]string{
		"--quota-max-overcommit=cpu=150":              `"cpu" is not a resource quotas limit on pods; name pods, requests.<resource> or limits.<resource> (requests.cpu, not cpu)`,
		"--quota-max-overcommit=requests.storage=100": `"requests.storage" is not a resource quotas limit on pods`,
		"--quota-max-overcommit=requests.cpu=0":       "requests.cpu=0: a bound is a percent of the allocatable from 1 to 100000",
	} {
		errs := parse(arg).Validate()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("%s: %v, want one error saying %q", arg, errs, want)
		}
	}
}
