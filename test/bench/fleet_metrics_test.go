package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Metric names the fleet benchmark reads from every replica's /metrics.
const (
	lockHoldMetric = "platform_registry_writer_lock_hold_seconds"
	lockWaitMetric = "platform_registry_writer_lock_wait_seconds"
	// memberLockWaitMetric: the wait for a member's own lock (writers of
	// different members do not wait for each other), where the registry has it.
	memberLockWaitMetric = "platform_registry_member_lock_wait_seconds"
	claimsMetric         = "platform_discovery_member_claims_total"
	fencedMetric         = "platform_discovery_fenced_writes_total"
	membersMetric        = "platform_discovery_members"
	syncedMetric         = "platform_discovery_synced"
	leaderMetric         = "platform_discovery_leader"
)

// histogram is a Prometheus histogram's cumulative bucket counts by upper
// bound (+Inf included), possibly summed over series and replicas.
type histogram map[float64]float64

var labelRE = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// parseLabels returns the labels of a sample line's {…} part.
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, m := range labelRE.FindAllStringSubmatch(s, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// metricSamples returns every sample of name (exactly, not its _bucket
// etc. unless given) in body with its labels.
func metricSamples(body, name string) []metricSample {
	var out []metricSample
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		labels := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels = parseLabels(rest[1:end])
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out = append(out, metricSample{labels: labels, value: v})
	}
	return out
}

type metricSample struct {
	labels map[string]string
	value  float64
}

// histogramsByOp parses the histogram name of body, one per value of its
// op label ("" when it has none).
func histogramsByOp(body, name string) map[string]histogram {
	out := map[string]histogram{}
	for _, s := range metricSamples(body, name+"_bucket") {
		le, ok := s.labels["le"]
		if !ok {
			continue
		}
		bound, err := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		if err != nil {
			continue
		}
		op := s.labels["op"]
		if out[op] == nil {
			out[op] = histogram{}
		}
		out[op][bound] += s.value
	}
	return out
}

// add adds o's counts into h.
func (h histogram) add(o histogram) {
	for b, c := range o {
		h[b] += c
	}
}

// sub returns h minus before: the observations between two scrapes.
func (h histogram) sub(before histogram) histogram {
	out := histogram{}
	for b, c := range h {
		out[b] = c - before[b]
	}
	return out
}

func (h histogram) count() float64 { return h[math.Inf(1)] }

// quantile estimates the q-quantile as Prometheus' histogram_quantile does:
// linear interpolation inside the bucket the rank falls in; the largest
// finite bound if it falls in +Inf. NaN without observations.
func (h histogram) quantile(q float64) float64 {
	total := h.count()
	if total <= 0 {
		return math.NaN()
	}
	bounds := make([]float64, 0, len(h))
	for b := range h {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, b := range bounds {
		c := h[b]
		if c >= rank {
			if math.IsInf(b, 1) {
				return prevBound
			}
			if c == prevCount {
				return b
			}
			return prevBound + (b-prevBound)*(rank-prevCount)/(c-prevCount)
		}
		prevBound, prevCount = b, c
	}
	return prevBound
}

// lockSnapshot is one replica's writer-lock histograms, by op, and its
// member-lock wait histogram.
type lockSnapshot struct{ hold, wait, memberWait map[string]histogram }

func readLockSnapshot(body string) lockSnapshot {
	return lockSnapshot{
		hold:       histogramsByOp(body, lockHoldMetric),
		wait:       histogramsByOp(body, lockWaitMetric),
		memberWait: histogramsByOp(body, memberLockWaitMetric),
	}
}

// lockWindow sums, over replicas and ops, the observations between two
// snapshots of each replica (before may be nil: since the process started).
type lockWindow struct {
	hold, wait, memberWait histogram
	holdByOp               map[string]histogram
}

func newLockWindow(before, after []lockSnapshot) lockWindow {
	w := lockWindow{hold: histogram{}, wait: histogram{}, memberWait: histogram{}, holdByOp: map[string]histogram{}}
	for i, a := range after {
		var b lockSnapshot
		if before != nil {
			b = before[i]
		}
		for op, h := range a.hold {
			d := h.sub(b.hold[op])
			w.hold.add(d)
			if w.holdByOp[op] == nil {
				w.holdByOp[op] = histogram{}
			}
			w.holdByOp[op].add(d)
		}
		for op, h := range a.wait {
			w.wait.add(h.sub(b.wait[op]))
		}
		for op, h := range a.memberWait {
			w.memberWait.add(h.sub(b.memberWait[op]))
		}
	}
	return w
}

// byOp describes the hold p99 and count of each op, for the log.
func (w lockWindow) byOp() string {
	ops := make([]string, 0, len(w.holdByOp))
	for op := range w.holdByOp {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	var parts []string
	for _, op := range ops {
		h := w.holdByOp[op]
		if h.count() == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0f× p99 %s", op, h.count(), secondsString(h.quantile(0.99))))
	}
	if len(parts) == 0 {
		return "none observed"
	}
	return strings.Join(parts, ", ")
}

func secondsString(s float64) string {
	if math.IsNaN(s) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f ms", s*1000)
}

// replicaShare is what a replica's /metrics say about the members it
// mirrors.
type replicaShare struct {
	// members is the sum of platform_discovery_members over its states (-1
	// when the metric is absent); states the non-zero states.
	members int
	states  string
	// clusters are those it reports synced (platform_discovery_synced).
	clusters []string
	// leader is platform_discovery_leader where the server has it (the
	// single-Lease design), else nil.
	leader *bool
	// claims and fenced are platform_discovery_member_claims_total and
	// fenced_writes_total, where the server has them (-1 otherwise).
	claims, fenced float64
}

func readReplicaShare(body string) replicaShare {
	var s replicaShare
	samples := metricSamples(body, membersMetric)
	if len(samples) == 0 {
		s.members = -1
	}
	var parts []string
	for _, m := range samples {
		s.members += int(m.value)
		if m.value > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", m.labels["state"], int(m.value)))
		}
	}
	slices.Sort(parts)
	s.states = strings.Join(parts, ", ")
	seen := map[string]bool{}
	for _, m := range metricSamples(body, syncedMetric) {
		if c := m.labels["cluster"]; c != "" && m.value == 1 && !seen[c] {
			seen[c] = true
			s.clusters = append(s.clusters, c)
		}
	}
	slices.Sort(s.clusters)
	if samples := metricSamples(body, leaderMetric); len(samples) > 0 {
		leader := samples[0].value > 0
		s.leader = &leader
	}
	s.claims, s.fenced = -1, -1
	for _, c := range []struct {
		name string
		dst  *float64
	}{{claimsMetric, &s.claims}, {fencedMetric, &s.fenced}} {
		if samples := metricSamples(body, c.name); len(samples) > 0 {
			*c.dst = 0
			for _, m := range samples {
				*c.dst += m.value
			}
		}
	}
	return s
}

// leaseHolders describes the Leases in the discovery Leases' namespace
// (kube-system: the servers run outside a pod) other than kube-apiserver's
// own identity Leases, grouped by holder. A holder is named by the replica
// whose log carries its identity (identity="…"), else by the replica that
// reports synced the most of the members whose Leases it holds.
func (f *fleetEnv) leaseHolders(ctx context.Context, replicas []fleetReplicaResult, logs map[string]string) (string, error) {
	leases, err := f.kube.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list Leases: %w", err)
	}
	byHolder := map[string][]string{}
	clustersOf := map[string][]string{}
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, "apiserver-") {
			continue
		}
		holder := "(none)"
		if h := l.Spec.HolderIdentity; h != nil && *h != "" {
			holder = *h
		}
		byHolder[holder] = append(byHolder[holder], l.Name)
		if _, id, ok := strings.Cut(l.Name, "-member-"); ok {
			clustersOf[holder] = append(clustersOf[holder], id)
		}
	}
	name := func(holder string) string {
		if holder == "(none)" {
			return holder
		}
		for r, path := range logs {
			if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), `identity="`+holder+`"`) {
				return r
			}
		}
		best, bestN := holder, 0
		for _, r := range replicas {
			n := 0
			for _, c := range clustersOf[holder] {
				if slices.Contains(r.clusters, c) {
					n++
				}
			}
			if n > bestN {
				best, bestN = r.name, n
			}
		}
		return best
	}
	holders := make([]string, 0, len(byHolder))
	for h := range byHolder {
		holders = append(holders, h)
	}
	slices.Sort(holders)
	var parts []string
	for _, h := range holders {
		names := byHolder[h]
		slices.Sort(names)
		shown := names
		if len(shown) > 3 {
			shown = append(slices.Clone(shown[:3]), "…")
		}
		parts = append(parts, fmt.Sprintf("%s: %d (%s)", name(h), len(names), strings.Join(shown, ", ")))
	}
	if len(parts) == 0 {
		return "no Leases", nil
	}
	return strings.Join(parts, "; "), nil
}

// dbSize is the size of a sub-benchmark's registry database.
type dbSize struct {
	database int64
	// tables: total relation size (heap, TOAST, indexes) of the main
	// tables, the metrics history summed over its partitions.
	tables []tableSize
}

type tableSize struct {
	name  string
	bytes int64
	rows  int64
}

func measureDBSize(ctx context.Context, pool *pgxpool.Pool) (dbSize, error) {
	var s dbSize
	if err := pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&s.database); err != nil {
		return s, fmt.Errorf("database size: %w", err)
	}
	for _, t := range []string{"cluster_node", "cluster_pod", "cluster_namespace", "registry_change"} {
		ts := tableSize{name: t}
		if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass), (SELECT count(*) FROM `+t+`)`, t).Scan(&ts.bytes, &ts.rows); err != nil {
			return s, fmt.Errorf("size of %s: %w", t, err)
		}
		s.tables = append(s.tables, ts)
	}
	ts := tableSize{name: "cluster_node_metrics"}
	err := pool.QueryRow(ctx, `
		SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::int8, (SELECT count(*) FROM cluster_node_metrics)
		FROM pg_partition_tree('cluster_node_metrics') WHERE isleaf`).Scan(&ts.bytes, &ts.rows)
	if err != nil {
		return s, fmt.Errorf("size of cluster_node_metrics: %w", err)
	}
	s.tables = append(s.tables, ts)
	return s, nil
}

func (s dbSize) String() string {
	parts := make([]string, 0, len(s.tables))
	for _, t := range s.tables {
		parts = append(parts, fmt.Sprintf("%s %s (%d rows)", t.name, mibString(t.bytes), t.rows))
	}
	return fmt.Sprintf("%s in all: %s", mibString(s.database), strings.Join(parts, ", "))
}

// logErrors counts a replica's klog error lines ("E" and MMDD) and returns
// the most frequent messages.
func logErrors(path string) (int, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	counts := map[string]int{}
	total := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 6 || line[0] != 'E' || !isDigits(line[1:5]) {
			continue
		}
		total++
		msg := line
		if _, after, ok := strings.Cut(line, "] "); ok {
			msg = after
		}
		// The quoted message, without the key/values that vary.
		if strings.HasPrefix(msg, `"`) {
			if end := strings.Index(msg[1:], `"`); end >= 0 {
				msg = msg[:end+2]
			}
		}
		if len(msg) > 160 {
			msg = msg[:160] + "…"
		}
		counts[msg]++
	}
	if err := sc.Err(); err != nil {
		return total, nil, err
	}
	msgs := make([]string, 0, len(counts))
	for m := range counts {
		msgs = append(msgs, m)
	}
	slices.SortFunc(msgs, func(a, b string) int { return counts[b] - counts[a] })
	if len(msgs) > 5 {
		msgs = msgs[:5]
	}
	for i, m := range msgs {
		msgs[i] = fmt.Sprintf("%d× %s", counts[m], m)
	}
	return total, msgs, nil
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
