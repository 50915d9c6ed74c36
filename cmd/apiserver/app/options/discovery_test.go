package options

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func parseDiscoveryFlags(t *testing.T, args ...string) (*DiscoveryOptions, string) {
	t.Helper()
	o := NewDiscoveryOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return o, out.String()
}

// TestKubeconfigFlag checks the conventional --kubeconfig and its deprecated
// alias --member-kubeconfig, which still works but warns.
func TestKubeconfigFlag(t *testing.T) {
	o, out := parseDiscoveryFlags(t, "--kubeconfig=/etc/hosting.kubeconfig", "--cluster-id=hosting")
	if got := o.kubeconfig(); got != "/etc/hosting.kubeconfig" {
		t.Errorf("--kubeconfig: kubeconfig() = %q", got)
	}
	if out != "" {
		t.Errorf("--kubeconfig printed %q, want nothing", out)
	}
	if errs := o.Validate(); len(errs) != 0 {
		t.Errorf("--kubeconfig with --cluster-id: %v", errs)
	}

	o, out = parseDiscoveryFlags(t, "--member-kubeconfig=/etc/old.kubeconfig", "--cluster-id=hosting")
	if got := o.kubeconfig(); got != "/etc/old.kubeconfig" {
		t.Errorf("--member-kubeconfig: kubeconfig() = %q", got)
	}
	if !strings.Contains(out, "--member-kubeconfig has been deprecated, use --kubeconfig instead") {
		t.Errorf("--member-kubeconfig printed %q, want a deprecation warning naming --kubeconfig", out)
	}
	if errs := o.Validate(); len(errs) != 0 {
		t.Errorf("--member-kubeconfig with --cluster-id: %v", errs)
	}

	o, _ = parseDiscoveryFlags(t, "--kubeconfig=/a", "--member-kubeconfig=/b", "--cluster-id=hosting")
	if errs := o.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "disagree") {
		t.Errorf("--kubeconfig and --member-kubeconfig disagreeing: %v, want one error saying so", errs)
	}
	o, _ = parseDiscoveryFlags(t, "--kubeconfig=/a")
	if errs := o.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "--cluster-id is required with --kubeconfig") {
		t.Errorf("--kubeconfig without --cluster-id: %v", errs)
	}

	fs := pflag.NewFlagSet("help", pflag.ContinueOnError)
	NewDiscoveryOptions().AddFlags(fs)
	if usage := fs.FlagUsages(); strings.Contains(usage, "member-kubeconfig ") || !strings.Contains(usage, "--kubeconfig string") {
		t.Errorf("help must list --kubeconfig and hide the deprecated alias:\n%s", usage)
	}
}

// TestUnservedRecheckFlag: --discovery-unserved-recheck-interval sets how
// often an optional resource a member does not serve is asked again; it
// defaults to 5m and must be positive.
func TestUnservedRecheckFlag(t *testing.T) {
	o, _ := parseDiscoveryFlags(t)
	if got := o.Config.Sync.UnservedRecheck; got != 5*time.Minute {
		t.Errorf("default %s, want 5m", got)
	}
	o, _ = parseDiscoveryFlags(t, "--discovery-unserved-recheck-interval=30s")
	if got := o.Config.Sync.UnservedRecheck; got != 30*time.Second {
		t.Errorf("--discovery-unserved-recheck-interval=30s set %s", got)
	}
	if errs := o.Validate(); len(errs) != 0 {
		t.Errorf("30s: %v", errs)
	}
	o, _ = parseDiscoveryFlags(t, "--discovery-unserved-recheck-interval=0")
	if errs := o.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "--discovery-unserved-recheck-interval must be positive") {
		t.Errorf("0: %v, want one error naming the flag", errs)
	}
}

// TestMaxConcurrentRelistsFlag: --discovery-max-concurrent-relists bounds
// a replica's relists at once; 16 by default, 0 for no limit, and a
// negative count is refused with a message naming the flag.
func TestMaxConcurrentRelistsFlag(t *testing.T) {
	o, _ := parseDiscoveryFlags(t)
	if got := o.Config.Sync.MaxRelists; got != 16 {
		t.Errorf("default %d, want 16", got)
	}
	for _, n := range []int{0, 4} {
		o, _ = parseDiscoveryFlags(t, fmt.Sprintf("--discovery-max-concurrent-relists=%d", n))
		if got := o.Config.Sync.MaxRelists; got != n {
			t.Errorf("--discovery-max-concurrent-relists=%d set %d", n, got)
		}
		if errs := o.Validate(); len(errs) != 0 {
			t.Errorf("%d: %v", n, errs)
		}
	}
	o, _ = parseDiscoveryFlags(t, "--discovery-max-concurrent-relists=-1")
	if errs := o.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "--discovery-max-concurrent-relists must be 0 (no limit) or more, got -1") {
		t.Errorf("-1: %v, want one error naming the flag", errs)
	}
}
