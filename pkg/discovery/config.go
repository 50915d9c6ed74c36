package discovery

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/utils/clock"

	"github.com/example/platform-apiserver/pkg/backoff"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Member is a member cluster to mirror, keyed by its cluster id (a DNS label).
type Member struct {
	ID     string
	Config *rest.Config
}

// Config configures discovery. The server's options fill it (their flags
// set its fields) and each component reads its group, so no setting is
// copied or renamed on the way.
type Config struct {
	// Hosting is the cluster the server runs in, mirrored under its id; it
	// holds the Leases. Nil when there is none.
	Hosting *Member
	Members MembersConfig
	Sync    SyncConfig
	Metrics MetricsConfig
	// LeaderElection shares the members among the replicas through Leases
	// in the hosting cluster (package shard): one per member,
	// <ResourceName>-member-<cluster id>, and one per replica, in
	// ResourceNamespace. Without it every replica mirrors every member.
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	Clock          clock.Clock
	Store          store.Writer
}

// MembersConfig says which clusters beyond the hosting one are members.
type MembersConfig struct {
	// Dir holds one kubeconfig per further member, named by its cluster id.
	Dir string
	// DirInterval is how often Dir is read for added and removed members.
	DirInterval time.Duration
	// RemovalGrace is how long no replica's configuration may list a
	// member before the registry removes it (ReconcileMembers): a Secret
	// briefly missing a key, or replicas that see an update at different
	// times, remove nothing.
	RemovalGrace time.Duration
	// AllowFilesAndPlugins lets member kubeconfigs use exec and
	// auth-provider plugins and file references (token, certificate, key,
	// CA files); else they are refused (kubeconfig.go, docs/security.md).
	AllowFilesAndPlugins bool
}

// SyncConfig tunes how each member resource is mirrored.
type SyncConfig struct {
	// BatchSize commits a batch once it holds this many events.
	BatchSize int
	// BatchDelay commits a non-empty batch at the latest this long after its first event.
	BatchDelay time.Duration
	// Backoff paces retries after member or registry failures.
	Backoff wait.Backoff
	// ApplyTimeout bounds one commit attempt.
	ApplyTimeout time.Duration
	// WatchTimeout is the shortest server-side timeout of a watch request;
	// each watch picks a random one between it and twice it, as client-go's
	// reflector does.
	WatchTimeout time.Duration
	// WedgeTimeout fails /livez when a worker has events pending and no sign
	// of life for this long.
	WedgeTimeout time.Duration
	// IdentityInterval is how often a running worker checks that the member
	// is still the cluster its cursors came from.
	IdentityInterval time.Duration
	// UnservedRecheck is how long after a member answered that it does not
	// serve an optional resource (404) or does not let discovery read it
	// (403) the resource is listed again.
	UnservedRecheck time.Duration
	// ListTimeout bounds one page of a relist's list (0: none): a member
	// that stops answering (a hung host) fails the relist, which frees its
	// relist slot and marks the member unreachable, instead of holding
	// both for ever.
	ListTimeout time.Duration
	// MaxRelists bounds how many member resources this replica lists at
	// once (a member's first sync, a 410, a member taken over); the others
	// wait their turn. 0: no limit.
	MaxRelists int
}

// MetricsConfig tunes the metrics.k8s.io scrapes and their history.
type MetricsConfig struct {
	// Interval is how often each member's metrics are scraped, and the
	// history maintained.
	Interval time.Duration
	// Resolution is how often the members' metrics-server takes a sample
	// (its --metric-resolution).
	Resolution time.Duration
	// Retention is how long node metrics samples are kept.
	Retention time.Duration
	// ListTimeout and WriteTimeout bound one scrape's list from the member
	// and its write to the registry.
	ListTimeout  time.Duration
	WriteTimeout time.Duration
	// MaintenanceTimeout bounds one round of metrics history maintenance.
	MaintenanceTimeout time.Duration
	// UsageReporting says when a node's or namespace's reported usage changes.
	UsageReporting store.UsageReporting
}

// DefaultConfig returns the defaults: the member directory read every 10s
// with a 5m removal grace, and members shared through Leases (15s/10s/2s,
// the Kubernetes components' timings) named platform-apiserver-discovery-*.
// Hosting, Members.Dir, the Lease namespace and Store are left to the caller.
func DefaultConfig() Config {
	return Config{
		Members: MembersConfig{
			DirInterval:  10 * time.Second,
			RemovalGrace: 5 * time.Minute,
		},
		Sync: SyncConfig{
			BatchSize:        500, // one list page (listPageSize): a relist commits page by page
			BatchDelay:       100 * time.Millisecond,
			Backoff:          backoff.New(500 * time.Millisecond),
			ApplyTimeout:     time.Minute,
			WatchTimeout:     5 * time.Minute,
			WedgeTimeout:     5 * time.Minute,
			IdentityInterval: time.Minute,
			UnservedRecheck:  5 * time.Minute,
			MaxRelists:       16,
			// A little over kube-apiserver's own limit of a request
			// (--request-timeout, 60 s): a page the member still
			// answers is never cut, one from a member that stopped
			// answering is.
			ListTimeout: 70 * time.Second,
		},
		Metrics: MetricsConfig{
			Interval:   30 * time.Second,
			Resolution: time.Minute, // metrics-server's default
			Retention:  24 * time.Hour,
			// A scrape of thousands of nodes lists in well under a second.
			ListTimeout:        20 * time.Second,
			WriteTimeout:       20 * time.Second,
			MaintenanceTimeout: time.Minute,
			UsageReporting: store.UsageReporting{
				Threshold: 0.05,
				// A quiet node is not restamped (Period 0); the member's
				// usage heartbeat says how fresh its usage is.
				UnknownAfter: 5 * time.Minute,
			},
		},
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:   true,
			LeaseDuration: metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline: metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:   metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:  "leases",
			ResourceName:  "platform-apiserver-discovery",
		},
		Clock: clock.RealClock{},
	}
}

// validate returns every problem with the configuration.
func (c *Config) validate() error {
	var errs []error
	if c.Hosting == nil && c.Members.Dir == "" {
		errs = append(errs, errors.New("no member cluster: neither a hosting cluster nor a member directory"))
	}
	if c.Hosting != nil {
		for _, msg := range validation.IsDNS1123Label(c.Hosting.ID) {
			errs = append(errs, fmt.Errorf("cluster id %q: %s", c.Hosting.ID, msg))
		}
	}
	if c.LeaderElection.LeaderElect && c.Hosting == nil {
		errs = append(errs, errors.New("leader election needs a hosting cluster for its Leases"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("no store"))
	}
	if c.Clock == nil {
		errs = append(errs, errors.New("no clock"))
	}
	if c.Members.RemovalGrace < 0 {
		errs = append(errs, fmt.Errorf("negative member removal grace period %s", c.Members.RemovalGrace))
	}
	if s := c.Sync; s.BatchSize < 1 || s.BatchDelay <= 0 || s.ApplyTimeout <= 0 || s.WatchTimeout <= 0 || s.WedgeTimeout <= 0 || s.IdentityInterval <= 0 ||
		s.UnservedRecheck <= 0 || s.MaxRelists < 0 || s.ListTimeout < 0 {
		errs = append(errs, fmt.Errorf("invalid sync settings %+v", s))
	}
	if m := c.Metrics; m.Interval <= 0 || m.Resolution <= 0 || m.ListTimeout <= 0 || m.WriteTimeout <= 0 || m.MaintenanceTimeout <= 0 ||
		!(m.UsageReporting.Threshold >= 0 && m.UsageReporting.Threshold <= 1) || m.UsageReporting.Period < 0 ||
		m.UsageReporting.UnknownAfter < MinUsageUnknownAfter(m) {
		errs = append(errs, fmt.Errorf("invalid metrics settings %+v", m))
	}
	return errors.Join(errs...)
}
