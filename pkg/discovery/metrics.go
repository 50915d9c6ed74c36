package discovery

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/example/platform-apiserver/pkg/discovery/shard"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

const metricsSubsystem = "platform_discovery"

var (
	eventsApplied = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "events_applied_total",
		Help:           "Member watch events (ADDED, MODIFIED, DELETED, BOOKMARK) and relisted objects committed to the registry.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource", "type"})
	batchSize = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "batch_size",
		Help:           "Events (or relisted objects) per committed batch.",
		Buckets:        metrics.ExponentialBuckets(1, 4, 9),
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource"})
	commitLag = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "commit_lag_seconds",
		Help:           "Time from receiving a member event to committing it to the registry.",
		Buckets:        metrics.ExponentialBuckets(0.005, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource"})
	applyDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "apply_duration_seconds",
		Help:           "Duration of successful registry transactions that commit a batch.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource"})
	relists = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "relists_total",
		Help: "Full lists of a member resource, by reason: initial (no persisted cursor), expired (410 Gone), too_large (the member is behind the cursor: restored or rebuilt) " +
			"or recheck (an optional resource the member did not serve, served when asked again).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource", "reason"})
	relistsWaiting = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "relists_waiting",
		Help:           "Relists waiting for one of --discovery-max-concurrent-relists' slots.",
		StabilityLevel: metrics.ALPHA,
	})
	resumes = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "resumes_total",
		Help:           "Starts that resumed a member watch from the persisted cursor without listing.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource"})
	expired = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "watch_expired_total",
		Help:           "410 Gone / Expired answers from a member (the cursor was too old), each followed by a relist.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource"})
	errorsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "errors_total",
		Help: "Discovery errors by reason: forbidden, unauthorized, member_unavailable, decode, " +
			"store_unavailable, store, conversion (a value that could not be mirrored, e.g. a malformed quantity), " +
			"watch_closed_early (the member ended a watch at once without an event; re-watched after a backoff), " +
			"or api_absent (a 404 on an optional resource: the member does not serve it). An optional resource's " +
			"forbidden and api_absent are counted at each answer, every --discovery-unserved-recheck-interval (see unserved).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource", "reason"})
	synced = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "synced",
		Help:           "1 once a member resource has completed its first list or resumed its watch, else 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource"})
	unserved = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: metricsSubsystem,
		Name:      "unserved",
		Help: "1 while a member does not serve an optional resource (DRA resourceslices, resourceclaims) to discovery, by state: " +
			"Absent (404: the API is not enabled there, or Kubernetes is older than 1.34) or Forbidden (403: discovery's " +
			"credentials lack get, list and watch on it there). The member still counts as synced; the resource is asked " +
			"again every --discovery-unserved-recheck-interval. Alert on Forbidden.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource", "state"})
	scrapeDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "metrics_scrape_duration_seconds",
		Help:           "Duration of successful metrics.k8s.io scrapes, from list to stored samples.",
		Buckets:        metrics.ExponentialBuckets(0.005, 2, 12),
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	samplesStored = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "metrics_samples_stored_total",
		Help:           "New NodeMetrics samples stored (duplicates of a stored sample are not counted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	scrapeErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "metrics_scrape_errors_total",
		Help: "Failed metrics.k8s.io scrapes by reason: metrics_api_absent (404), metrics_api_unavailable (503), forbidden (403), " +
			"unauthorized (401), timeout, member_unavailable, store, store_unavailable, store_timeout, and conversion (a skipped sample).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "reason"})
	usageHeartbeat = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: metricsSubsystem,
		Name:      "usage_heartbeat_timestamp_seconds",
		Help: "The member's usage heartbeat: Unix time of the newest node metrics sample this replica recorded of it (ClusterCapacity " +
			"status.mirroring.lastUsageTime, unrounded). time() minus its max over replicas is how old the member's usage is.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	completeAsOf = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: metricsSubsystem,
		Name:      "member_complete_as_of_timestamp_seconds",
		Help: "The member's mirror heartbeat as this replica last committed it to the registry (ClusterCapacity " +
			"status.mirroring.completeAsOf, unrounded): Unix time up to which the registry holds every change of every resource mirrored. " +
			"time() minus its max over replicas is the member's data age; readers show the member Stale past --member-stale-after.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	usageReports = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "usage_reports_total",
		Help:           "NodeCapacity usage reports: nodes restamped because usage moved past --usage-report-threshold, became unknown (a node the scrapes no longer list for --usage-unknown-after) or, with --usage-report-period, the reported sample got older than the period.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	maintenanceDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "metrics_maintenance_duration_seconds",
		Help:           "Duration of successful rounds of node metrics history maintenance (partitions, retention, stale usage).",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	})
	maintenanceErrors = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "metrics_maintenance_errors_total",
		Help:           "Failed rounds of node metrics history maintenance.",
		StabilityLevel: metrics.ALPHA,
	})
	partitionsDropped = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "metrics_partitions_dropped_total",
		Help:           "Hourly node metrics history partitions dropped because they fell out of --metrics-retention.",
		StabilityLevel: metrics.ALPHA,
	})
	usageExpired = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "usage_expired_total",
		Help:           "Nodes and namespaces whose reported usage became unknown because no sample came for two report periods plus a scrape interval.",
		StabilityLevel: metrics.ALPHA,
	})
	identityChanges = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "member_identity_changes_total",
		Help:           "Times a member turned out not to be the cluster its cursors came from (kube-system uid changed); each drops the cursors and relists.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	fencedWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "fenced_writes_total",
		Help:           "Writes of a member refused because another replica claimed it since (or it was removed); the worker stops at the first.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	rewinds = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "member_rewinds_total",
		Help:           "Times a member's writer found the registry database had failed over since its claim (its last writes may be lost) and claimed the member again, resuming from the cursors the registry kept.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	claims = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "member_claims_total",
		Help:           "Times this replica claimed a member in the registry (a new epoch) to start mirroring it.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	quarantined = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "quarantined_total",
		Help:           "Member objects the registry rejected (e.g. a value PostgreSQL cannot store), left out so the rest of their batch commits.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource"})
	kubeconfigsRefused = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "member_kubeconfigs_refused_total",
		Help: "Member kubeconfig files not mirrored (each content counted once), by reason: exec, auth_provider, token_file, " +
			"client_certificate_file, client_key_file or certificate_authority_file (a plugin or file reference, refused " +
			"without --member-kubeconfig-allow-files-and-plugins; the first one found), or invalid (unreadable, not a " +
			"kubeconfig, or a file name that is no cluster id).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	memberRemovals = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "member_removals_total",
		Help:           "Members this replica removed from the registry (each member is removed by one replica): no replica's configuration listed them for --member-removal-grace-period. Their usage history stays.",
		StabilityLevel: metrics.ALPHA,
	})
	membersAbsent = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "members_absent",
		Help:           "Members this replica knows that no configuration lists, kept until --member-removal-grace-period has passed.",
		StabilityLevel: metrics.ALPHA,
	})
	membersUnknown = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem: metricsSubsystem,
		Name:      "members_config_unknown",
		Help: "1 while --member-kubeconfig-dir cannot be read or names no member although there are members (the members Secret " +
			"is missing or emptied): every member is kept as it is, none is removed; else 0.",
		StabilityLevel: metrics.ALPHA,
	})
	stuck = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "stuck",
		Help:           "1 while a member resource cannot commit its batch and is retrying with backoff, else 0: alert when it stays 1.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster", "resource"})
)

var registerOnce sync.Once

// RegisterMetrics registers discovery's metrics with the legacy registry the
// API server's /metrics serves. It is safe to call more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(eventsApplied, batchSize, commitLag, applyDuration, relistsWaiting,
			relists, resumes, expired, errorsTotal, synced, unserved,
			scrapeDuration, samplesStored, scrapeErrors, usageReports, usageHeartbeat, completeAsOf,
			maintenanceDuration, maintenanceErrors, partitionsDropped, usageExpired,
			quarantined, stuck, identityChanges, fencedWrites, rewinds, claims, kubeconfigsRefused,
			memberRemovals, membersAbsent, membersUnknown, shard.LeaseWrites)
	})
}

// forgetCluster drops the series of a member that was removed.
func forgetCluster(cluster string) {
	usageHeartbeat.DeleteLabelValues(cluster)
	completeAsOf.DeleteLabelValues(cluster)
	for _, r := range memberResources {
		synced.DeleteLabelValues(cluster, string(r.name))
		stuck.DeleteLabelValues(cluster, string(r.name))
		forgetUnserved(cluster, r.name)
	}
}

// unservedStates are the unserved gauge's values of its state label.
var unservedStates = []store.APIState{store.APIAbsent, store.APIForbidden}

// setUnserved makes the unserved gauge of a member resource say st
// (nothing while "": served or not known).
func setUnserved(cluster string, r store.Resource, st store.APIState) {
	for _, s := range unservedStates {
		if s == st {
			unserved.WithLabelValues(cluster, string(r), string(s)).Set(1)
		} else {
			unserved.DeleteLabelValues(cluster, string(r), string(s))
		}
	}
}

func forgetUnserved(cluster string, r store.Resource) { setUnserved(cluster, r, "") }

var membersDesc = metrics.NewDesc(metricsSubsystem+"_members",
	"Member clusters this replica mirrors, by state: syncing (first sync running), synced, stuck (a commit keeps failing), "+
		"unreachable (the member does not answer or refuses access).",
	[]string{"state"}, nil, metrics.ALPHA, "")

// memberStateLabels are the members gauge's values of its state label,
// one per member state, as the gauge named them before the registry
// recorded the state (Lagging is "stuck").
var memberStateLabels = []struct {
	state store.MemberState
	label string
}{
	{store.MemberSyncing, "syncing"},
	{store.MemberSynced, "synced"},
	{store.MemberLagging, "stuck"},
	{store.MemberUnreachable, "unreachable"},
}

// membersCollector reports how many members are in each state at scrape time.
type membersCollector struct {
	metrics.BaseStableCollector
	members *members
}

func (c *membersCollector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- membersDesc }

func (c *membersCollector) CollectWithStability(ch chan<- metrics.Metric) {
	counts := map[store.MemberState]int{}
	for _, w := range c.members.workers() {
		counts[w.state()]++
	}
	for _, st := range memberStateLabels {
		ch <- metrics.NewLazyConstMetric(membersDesc, metrics.GaugeValue, float64(counts[st.state]), st.label)
	}
}

var registerMembersOnce sync.Once

// registerMembersCollector reports the members of the process's discovery.
func registerMembersCollector(m *members) {
	registerMembersOnce.Do(func() { legacyregistry.CustomMustRegister(&membersCollector{members: m}) })
}
