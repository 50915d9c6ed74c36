package options

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	configoptions "k8s.io/component-base/config/options"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/discovery"
)

// DiscoveryOptions configure the discovery worker that mirrors member
// clusters into the registry. The flags set fields of Config, the
// discovery configuration itself (the standard leader election flags its
// LeaderElection); ApplyTo completes it with the hosting cluster and the
// Leases' namespace.
type DiscoveryOptions struct {
	ClusterID string
	// Kubeconfig is the hosting cluster's kubeconfig (--kubeconfig);
	// DeprecatedMemberKubeconfig is its old name, --member-kubeconfig.
	Kubeconfig                 string
	DeprecatedMemberKubeconfig string
	// Config is discovery's configuration; an empty
	// LeaderElection.ResourceNamespace is the server's own (ownNamespace).
	Config discovery.Config
}

// NewDiscoveryOptions returns the defaults (discovery.DefaultConfig).
func NewDiscoveryOptions() *DiscoveryOptions {
	return &DiscoveryOptions{Config: discovery.DefaultConfig()}
}

// AddFlags adds the discovery flags.
func (o *DiscoveryOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ClusterID, "cluster-id", o.ClusterID, ""+
		"Id of the hosting cluster (a DNS label), under which it is mirrored. Required when discovery runs.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, ""+
		"Kubeconfig of the hosting cluster, mirrored as --cluster-id; it also holds the discovery Leases. "+
		"Empty means the in-cluster config when running in a pod; without either, discovery is disabled "+
		"(unless --member-kubeconfig-dir is set). Delegated authentication and authorization use "+
		"--authentication-kubeconfig and --authorization-kubeconfig.")
	fs.StringVar(&o.DeprecatedMemberKubeconfig, "member-kubeconfig", o.DeprecatedMemberKubeconfig,
		"Deprecated alias of --kubeconfig.")
	_ = fs.MarkDeprecated("member-kubeconfig", "use --kubeconfig instead")
	fs.StringVar(&o.Config.Members.Dir, "member-kubeconfig-dir", o.Config.Members.Dir, ""+
		"Directory of kubeconfig files of further member clusters, each named by its cluster id. "+
		"Files added or removed are picked up; a member whose file stays gone from every replica's directory for "+
		"--member-removal-grace-period is removed (its objects deleted, its usage history kept).")
	fs.BoolVar(&o.Config.Members.AllowFilesAndPlugins, "member-kubeconfig-allow-files-and-plugins", o.Config.Members.AllowFilesAndPlugins, ""+
		"Let the kubeconfigs of --member-kubeconfig-dir use exec and auth-provider plugins and name files (tokenFile, "+
		"client-certificate, client-key, certificate-authority). Off, such a kubeconfig is refused (logged with the "+
		"fields, counted in platform_discovery_member_kubeconfigs_refused_total) and its member is not mirrored: whoever "+
		"can write the members Secret could otherwise run commands in the server or send its own service account token "+
		"to a server of their choosing. Member kubeconfigs carry their credentials inline (token, client-certificate-data, "+
		"client-key-data, certificate-authority-data).")
	fs.DurationVar(&o.Config.Members.DirInterval, "member-kubeconfig-dir-interval", o.Config.Members.DirInterval,
		"How often --member-kubeconfig-dir is read for added, changed and removed members.")
	fs.DurationVar(&o.Config.Members.RemovalGrace, "member-removal-grace-period", o.Config.Members.RemovalGrace, ""+
		"How long no replica's configuration may list a member (its file gone from --member-kubeconfig-dir, or rows of a "+
		"cluster nobody configures) before the registry removes it, once for every replica: its objects are deleted and "+
		"its usage history stays for --metrics-retention, so listing it again within that brings it back with its history. "+
		"Until then it keeps being mirrored. A directory that is unreadable or names no member (a members Secret missing or "+
		"emptied) removes nothing. 0 removes at once.")
	fs.IntVar(&o.Config.Sync.BatchSize, "discovery-batch-size", o.Config.Sync.BatchSize,
		"Member events committed to the registry in one transaction at most.")
	fs.DurationVar(&o.Config.Sync.BatchDelay, "discovery-batch-delay", o.Config.Sync.BatchDelay,
		"How long a member event may wait for more to share its transaction; bounds the freshness cost of batching.")
	fs.IntVar(&o.Config.Sync.MaxRelists, "discovery-max-concurrent-relists", o.Config.Sync.MaxRelists, ""+
		"How many member resources this replica lists at once (a member's first sync, a 410 Gone, members taken over from "+
		"a stopped replica); the others wait their turn (a member's nodes and namespaces, which wait for its pods, before "+
		"other relists), with no request or commit timeout running, and "+
		"platform_discovery_relists_waiting counts them. 0 means no limit.")
	fs.DurationVar(&o.Config.Sync.UnservedRecheck, "discovery-unserved-recheck-interval", o.Config.Sync.UnservedRecheck, ""+
		"How often a member that does not serve an optional resource (the DRA resource.k8s.io/v1 resourceslices and "+
		"resourceclaims: 404, API not enabled or Kubernetes older than 1.34) or forbids discovery to read it (403) is "+
		"asked again. Until then the member counts as synced and its ClusterCapacity shows the API as Absent or Forbidden.")
	fs.DurationVar(&o.Config.Metrics.Interval, "metrics-interval", o.Config.Metrics.Interval,
		"How often each member's metrics.k8s.io NodeMetrics are scraped into the registry.")
	fs.DurationVar(&o.Config.Metrics.Resolution, "metrics-resolution", o.Config.Metrics.Resolution, ""+
		"How often the members' metrics-server takes a new sample (its --metric-resolution, 60s by default): "+
		"a sample reaches the registry up to this plus --metrics-interval after it was taken. It sets the least --usage-unknown-after.")
	fs.DurationVar(&o.Config.Metrics.Retention, "metrics-retention", o.Config.Metrics.Retention,
		"How long node metrics samples are kept in the history. It is kept in hourly partitions, dropped whole once "+
			"their hour is older than this, so a sample stays between the retention and the retention plus an hour.")
	fs.Float64Var(&o.Config.Metrics.UsageReporting.Threshold, "usage-report-threshold", o.Config.Metrics.UsageReporting.Threshold, ""+
		"How far a node's CPU or memory usage must move from its reported value, as a fraction of the node's allocatable "+
		"(0 to 1; 0.05 = 5%), before NodeCapacity shows the new sample (a new resourceVersion and a watch event). "+
		"Smaller moves are recorded in the history only, so watchers of a quiet fleet see no events; the trade-off is that "+
		"status.usage may lag the latest sample by up to this much; the member's ClusterCapacity status.mirroring.lastUsageTime says as of when. "+
		"Requests, schedulability, taints and conditions are not affected.")
	fs.DurationVar(&o.Config.Metrics.UsageReporting.Period, "usage-report-period", o.Config.Metrics.UsageReporting.Period, ""+
		"Opt-in: how often each node's and namespace's reported usage is refreshed with its newest sample even if usage "+
		"did not move (like the kubelet's nodeStatusReportFrequency), at the price of about one watch event per node per period. "+
		"0 (the default) never refreshes a quiet node: its status.usage.timestamp stays the time of the sample it last changed to, "+
		"and its member's ClusterCapacity status.mirroring.lastUsageTime (the usage heartbeat, to a minute) says as of when it holds. "+
		"Each node refreshes at its own phase of the period, so refreshes spread evenly instead of coming in one burst.")
	fs.DurationVar(&o.Config.Metrics.UsageReporting.UnknownAfter, "usage-unknown-after", o.Config.Metrics.UsageReporting.UnknownAfter, ""+
		"How long a reported usage stays shown without a sample confirming it: a node (or namespace) the member's scrapes no "+
		"longer list, or every node of a member whose usage heartbeat stopped (metrics.k8s.io failing, the member unreachable), "+
		"then shows its usage as unknown (one watch event) rather than a number no longer measured. "+
		"A member's heartbeat is held to a minute, so its nodes' usage ends up to a minute later than this. "+
		"At least twice --metrics-interval plus --metrics-resolution.")
	configoptions.BindLeaderElectionFlags(&o.Config.LeaderElection, fs)
	fs.Lookup("leader-elect").Usage = "Share the member clusters among the replicas through Leases in the hosting cluster: " +
		"each member is mirrored by the replica holding its Lease, and taken over when that replica dies. " +
		"Without it every replica mirrors every member, so run one replica only."
	fs.Lookup("leader-elect-resource-name").Usage = "Prefix of the discovery Leases: <name>-member-<cluster id> per member, " +
		"<name>-replica-<hash> per replica."
	fs.Lookup("leader-elect-resource-namespace").Usage = "Namespace of the discovery Leases in the hosting cluster " +
		"(default: the server's own, from $POD_NAMESPACE or its service account; outside a cluster kube-system)."
	fs.Lookup("leader-elect-lease-duration").Usage = "How long a replica's presence Lease, and with it every member Lease it holds, stays alive once the replica stops renewing it: " +
		"a dead replica's members move after about this long. Member Leases themselves say 20 times this and are rewritten only every third to two thirds of that."
	fs.Lookup("leader-elect-renew-deadline").Usage = "Timeout of one round of Lease calls (must be less than the lease duration)."
	fs.Lookup("leader-elect-retry-period").Usage = "How often each replica looks at the Leases, to take over, hand over or renew members."
}

// Validate returns every problem with the options.
func (o *DiscoveryOptions) Validate() []error {
	var errs []error
	if o.ClusterID != "" {
		for _, msg := range validation.IsDNS1123Label(o.ClusterID) {
			errs = append(errs, fmt.Errorf("--cluster-id %q: %s", o.ClusterID, msg))
		}
	}
	if o.Kubeconfig != "" && o.DeprecatedMemberKubeconfig != "" && o.Kubeconfig != o.DeprecatedMemberKubeconfig {
		errs = append(errs, fmt.Errorf("--kubeconfig %q and its deprecated alias --member-kubeconfig %q disagree: set --kubeconfig only",
			o.Kubeconfig, o.DeprecatedMemberKubeconfig))
	}
	if o.kubeconfig() != "" && o.ClusterID == "" {
		errs = append(errs, errors.New("--cluster-id is required with --kubeconfig: the hosting cluster is mirrored under it"))
	}
	if o.Config.Members.RemovalGrace < 0 {
		errs = append(errs, fmt.Errorf("--member-removal-grace-period must be zero or positive (e.g. 5m), got %s", o.Config.Members.RemovalGrace))
	}
	if o.Config.Members.DirInterval <= 0 {
		errs = append(errs, fmt.Errorf("--member-kubeconfig-dir-interval must be positive, got %s", o.Config.Members.DirInterval))
	}
	if o.Config.Sync.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("--discovery-batch-size must be at least 1, got %d", o.Config.Sync.BatchSize))
	}
	if o.Config.Sync.BatchDelay <= 0 {
		errs = append(errs, fmt.Errorf("--discovery-batch-delay must be positive, got %s", o.Config.Sync.BatchDelay))
	}
	if o.Config.Sync.MaxRelists < 0 {
		errs = append(errs, fmt.Errorf("--discovery-max-concurrent-relists must be 0 (no limit) or more, got %d", o.Config.Sync.MaxRelists))
	}
	if o.Config.Sync.UnservedRecheck <= 0 {
		errs = append(errs, fmt.Errorf("--discovery-unserved-recheck-interval must be positive (e.g. 5m), got %s", o.Config.Sync.UnservedRecheck))
	}
	if o.Config.Metrics.Interval <= 0 {
		errs = append(errs, fmt.Errorf("--metrics-interval must be positive, got %s", o.Config.Metrics.Interval))
	}
	if !(o.Config.Metrics.UsageReporting.Threshold >= 0 && o.Config.Metrics.UsageReporting.Threshold <= 1) {
		errs = append(errs, fmt.Errorf("--usage-report-threshold must be a fraction of allocatable between 0 and 1 (e.g. 0.05 for 5%%), got %v", o.Config.Metrics.UsageReporting.Threshold))
	}
	if o.Config.Metrics.UsageReporting.Period < 0 {
		errs = append(errs, fmt.Errorf("--usage-report-period must be 0 (off, the default) or a positive duration (e.g. 5m), got %s", o.Config.Metrics.UsageReporting.Period))
	}
	if o.Config.Metrics.Resolution <= 0 {
		errs = append(errs, fmt.Errorf("--metrics-resolution must be positive (the members' metrics-server --metric-resolution, e.g. 60s), got %s", o.Config.Metrics.Resolution))
	}
	if least := discovery.MinUsageUnknownAfter(o.Config.Metrics); o.Config.Metrics.Interval > 0 && o.Config.Metrics.Resolution > 0 && o.Config.Metrics.UsageReporting.UnknownAfter < least {
		errs = append(errs, fmt.Errorf("--usage-unknown-after (%s) must be at least %s with --metrics-interval=%s and --metrics-resolution=%s "+
			"(twice the interval plus the resolution), or a healthy member's usage would blink unknown",
			o.Config.Metrics.UsageReporting.UnknownAfter, least, o.Config.Metrics.Interval, o.Config.Metrics.Resolution))
	}
	if o.Config.Metrics.Retention < o.Config.Metrics.Interval {
		errs = append(errs, fmt.Errorf("--metrics-retention (%s) must be at least --metrics-interval (%s)", o.Config.Metrics.Retention, o.Config.Metrics.Interval))
	}
	if le := o.Config.LeaderElection; le.LeaderElect {
		if le.ResourceLock != "leases" {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-lock must be leases, got %q", le.ResourceLock))
		}
		if le.LeaseDuration.Duration <= 0 || le.RenewDeadline.Duration <= 0 || le.RetryPeriod.Duration <= 0 {
			errs = append(errs, errors.New("--leader-elect-lease-duration, --leader-elect-renew-deadline and --leader-elect-retry-period must be positive"))
		} else if le.RenewDeadline.Duration >= le.LeaseDuration.Duration {
			errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be less than --leader-elect-lease-duration (%s)",
				le.RenewDeadline.Duration, le.LeaseDuration.Duration))
		}
		if le.ResourceName == "" {
			errs = append(errs, errors.New("--leader-elect-resource-name must be set: it prefixes the discovery Leases"))
		}
		for _, msg := range validation.IsDNS1123Subdomain(le.ResourceName + "-member-x") {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-name %q does not make valid Lease names: %s", le.ResourceName, msg))
		}
	}
	return errs
}

// ApplyTo sets *c to discovery's configuration (its Store is the server's
// registry), or to nil, with a log line saying why, when no member cluster
// is configured (to ctx's logger).
func (o *DiscoveryOptions) ApplyTo(ctx context.Context, c **discovery.Config) error {
	hosting, err := o.hostingConfig()
	if err != nil {
		return err
	}
	if hosting == nil && o.Config.Members.Dir == "" {
		klog.FromContext(ctx).Info("Discovery disabled: no member cluster configured (no --kubeconfig, not running in a pod, no --member-kubeconfig-dir); serving the registry as it is")
		*c = nil
		return nil
	}
	cfg := o.Config
	le := &cfg.LeaderElection
	if le.ResourceNamespace == "" {
		le.ResourceNamespace = ownNamespace()
	}
	if hosting != nil {
		if o.ClusterID == "" {
			return errors.New("--cluster-id is required: running in a pod, the hosting cluster is mirrored under it")
		}
		cfg.Hosting = &discovery.Member{ID: o.ClusterID, Config: hosting}
	}
	klog.FromContext(ctx).Info("Discovery enabled", "cluster", o.ClusterID, "memberDir", cfg.Members.Dir,
		"leaderElect", le.LeaderElect, "leases", klog.KRef(le.ResourceNamespace, le.ResourceName))
	*c = &cfg
	return nil
}

// serviceAccountNamespace is where a pod finds its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the namespace the server runs in: $POD_NAMESPACE, else
// its service account's, else (outside a cluster) kube-system.
func ownNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return metav1.NamespaceSystem
}

// kubeconfig is --kubeconfig, or else its deprecated alias --member-kubeconfig.
func (o *DiscoveryOptions) kubeconfig() string {
	if o.Kubeconfig != "" {
		return o.Kubeconfig
	}
	return o.DeprecatedMemberKubeconfig
}

// hostingConfig returns the hosting cluster's config: --kubeconfig (or its
// deprecated alias --member-kubeconfig), else the in-cluster config, else nil.
func (o *DiscoveryOptions) hostingConfig() (*rest.Config, error) {
	if path := o.kubeconfig(); path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("in-cluster config: %w", err)
	}
	return cfg, nil
}
