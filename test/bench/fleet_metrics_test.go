package bench

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// promHistogram is a Prometheus histogram's cumulative bucket counts by upper
// bound (+Inf included), possibly summed over series and replicas.
type promHistogram map[float64]float64

// metricSample is one sample line of a /metrics body.
type metricSample struct {
	labels map[string]string
	value  float64
}

var labelRE = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// metricSamples returns every sample of name (exactly: name_bucket only when
// asked) in body with its labels.
func metricSamples(body, name string) []metricSample {
	var out []metricSample
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), name)
		if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		labels := map[string]string{}
		if end := strings.LastIndexByte(rest, '}'); strings.HasPrefix(rest, "{") && end > 0 {
			for _, m := range labelRE.FindAllStringSubmatch(rest[1:end], -1) {
				labels[m[1]] = m[2]
			}
			rest = rest[end+1:]
		}
		if fields := strings.Fields(rest); len(fields) > 0 {
			if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
				out = append(out, metricSample{labels, v})
			}
		}
	}
	return out
}

// sumSamples sums name's samples; -1 when body has none.
func sumSamples(body, name string) float64 {
	samples := metricSamples(body, name)
	if len(samples) == 0 {
		return -1
	}
	var total float64
	for _, s := range samples {
		total += s.value
	}
	return total
}

// histogramsByOp parses the histogram name of body, one per value of its op
// label ("" when it has none).
func histogramsByOp(body, name string) map[string]promHistogram {
	out := map[string]promHistogram{}
	for _, s := range metricSamples(body, name+"_bucket") {
		bound, err := strconv.ParseFloat(s.labels["le"], 64) // "+Inf" parses as +Inf
		if err != nil {
			continue
		}
		if out[s.labels["op"]] == nil {
			out[s.labels["op"]] = promHistogram{}
		}
		out[s.labels["op"]][bound] += s.value
	}
	return out
}

// addDiff adds a minus before (nil: nothing before) into h.
func (h promHistogram) addDiff(a, before promHistogram) {
	for b, c := range a {
		h[b] += c - before[b]
	}
}

func (h promHistogram) count() float64 { return h[math.Inf(1)] }

// quantile estimates the q-quantile as Prometheus' histogram_quantile does:
// linear interpolation inside the bucket the rank falls in; the largest
// finite bound if it falls in +Inf. NaN without observations.
func (h promHistogram) quantile(q float64) float64 {
	if h.count() <= 0 {
		return math.NaN()
	}
	rank := q * h.count()
	prevBound, prevCount := 0.0, 0.0
	for _, b := range slices.Sorted(maps.Keys(h)) {
		c := h[b]
		if c >= rank {
			switch {
			case math.IsInf(b, 1):
				return prevBound
			case c == prevCount:
				return b
			}
			return prevBound + (b-prevBound)*(rank-prevCount)/(c-prevCount)
		}
		prevBound, prevCount = b, c
	}
	return prevBound
}

// lockSnapshot is one replica's writer-lock hold and wait and member-lock
// wait histograms (where the registry has that lock), by op.
type lockSnapshot [3]map[string]promHistogram

func readLockSnapshot(body string) lockSnapshot {
	return lockSnapshot{
		histogramsByOp(body, "platform_registry_writer_lock_hold_seconds"),
		histogramsByOp(body, "platform_registry_writer_lock_wait_seconds"),
		histogramsByOp(body, "platform_registry_member_lock_wait_seconds"),
	}
}

// lockStats are the p99s in seconds (NaN without observations) of the
// writer lock's hold and wait and the member lock's wait, summed over
// replicas and ops between two snapshots of each replica (before nil: since
// the process started), and each op's hold p99 and count, for the log.
type lockStats struct {
	hold, wait, memberWait float64
	byOp                   string
}

func newLockStats(before, after []lockSnapshot) lockStats {
	sums := [3]promHistogram{{}, {}, {}}
	holdByOp := map[string]promHistogram{}
	for i, a := range after {
		var b lockSnapshot
		if before != nil {
			b = before[i]
		}
		for k := range a {
			for op, h := range a[k] {
				sums[k].addDiff(h, b[k][op])
				if k == 0 {
					if holdByOp[op] == nil {
						holdByOp[op] = promHistogram{}
					}
					holdByOp[op].addDiff(h, b[k][op])
				}
			}
		}
	}
	s := lockStats{hold: sums[0].quantile(0.99), wait: sums[1].quantile(0.99), memberWait: sums[2].quantile(0.99), byOp: "none observed"}
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(holdByOp)) {
		if h := holdByOp[op]; h.count() > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f× p99 %s", op, h.count(), secondsString(h.quantile(0.99))))
		}
	}
	if len(parts) > 0 {
		s.byOp = strings.Join(parts, ", ")
	}
	return s
}

func secondsString(s float64) string {
	if math.IsNaN(s) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f ms", s*1000)
}

// replicaShare is what a replica's /metrics say about the members it mirrors.
type replicaShare struct {
	// members sums platform_discovery_members over its states (-1 when
	// absent); states lists the non-zero ones.
	members int
	states  string
	// clusters are those it reports synced (platform_discovery_synced).
	clusters []string
	// leader is platform_discovery_leader where the server has it (the
	// single-Lease design), else nil.
	leader *bool
	// claims and fenced are platform_discovery_member_claims_total and
	// fenced_writes_total (-1 where the server lacks them).
	claims, fenced float64
}

func readReplicaShare(body string) replicaShare {
	s := replicaShare{members: int(sumSamples(body, "platform_discovery_members"))}
	var parts []string
	for _, m := range metricSamples(body, "platform_discovery_members") {
		if m.value > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", m.labels["state"], int(m.value)))
		}
	}
	slices.Sort(parts)
	s.states = strings.Join(parts, ", ")
	for _, m := range metricSamples(body, "platform_discovery_synced") {
		if c := m.labels["cluster"]; c != "" && m.value == 1 && !slices.Contains(s.clusters, c) {
			s.clusters = append(s.clusters, c)
		}
	}
	slices.Sort(s.clusters)
	if samples := metricSamples(body, "platform_discovery_leader"); len(samples) > 0 {
		leader := samples[0].value > 0
		s.leader = &leader
	}
	s.claims = sumSamples(body, "platform_discovery_member_claims_total")
	s.fenced = sumSamples(body, "platform_discovery_fenced_writes_total")
	return s
}

// leaseHolders describes the Leases in kube-system (where the discovery
// Leases are: the servers run outside a pod) other than kube-apiserver's
// own, grouped by holder, each named by the replica whose log carries its
// identity (identity="…").
func (f *fleetEnv) leaseHolders(ctx context.Context, logs map[string]string) (string, error) {
	leases, err := f.kube.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list Leases: %w", err)
	}
	byHolder := map[string][]string{}
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, "apiserver-") {
			continue
		}
		holder := "(none)"
		if h := l.Spec.HolderIdentity; h != nil && *h != "" {
			holder = *h
		}
		byHolder[holder] = append(byHolder[holder], l.Name)
	}
	var parts []string
	for _, h := range slices.Sorted(maps.Keys(byHolder)) {
		names, name := slices.Sorted(slices.Values(byHolder[h])), h
		for r, path := range logs {
			if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), `identity="`+h+`"`) {
				name = r
			}
		}
		if len(names) > 3 {
			names = append(names[:3], "…")
		}
		parts = append(parts, fmt.Sprintf("%s: %d (%s)", name, len(byHolder[h]), strings.Join(names, ", ")))
	}
	if len(parts) == 0 {
		return "no Leases", nil
	}
	return strings.Join(parts, "; "), nil
}

// dbSize is the size of a sub-benchmark's registry database and of its main
// tables (heap, TOAST, indexes; the metrics history over its partitions).
type dbSize struct {
	database int64
	tables   []string
}

func measureDBSize(ctx context.Context, pool *pgxpool.Pool) (dbSize, error) {
	var s dbSize
	if err := pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&s.database); err != nil {
		return s, fmt.Errorf("database size: %w", err)
	}
	for _, t := range []string{"cluster_node", "cluster_pod", "cluster_namespace", "registry_change", "cluster_node_metrics"} {
		var bytes, rows int64
		size := `pg_total_relation_size($1::regclass)`
		if t == "cluster_node_metrics" {
			size = `(SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::int8 FROM pg_partition_tree($1::regclass) WHERE isleaf)`
		}
		err := pool.QueryRow(ctx, `SELECT `+size+`, (SELECT count(*) FROM `+t+`)`, t).Scan(&bytes, &rows)
		if err != nil {
			return s, fmt.Errorf("size of %s: %w", t, err)
		}
		s.tables = append(s.tables, fmt.Sprintf("%s %s (%d rows)", t, mibString(bytes), rows))
	}
	return s, nil
}

func (s dbSize) String() string {
	return fmt.Sprintf("%s in all: %s", mibString(s.database), strings.Join(s.tables, ", "))
}

// logErrors counts a replica's klog error lines ("E" and MMDD) and returns
// the five most frequent messages.
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
		if len(line) < 6 || line[0] != 'E' || strings.Trim(line[1:5], "0123456789") != "" {
			continue
		}
		total++
		_, msg, ok := strings.Cut(line, "] ")
		if !ok {
			msg = line
		}
		// The quoted message, without the key/values that vary.
		if quoted, ok := strings.CutPrefix(msg, `"`); ok {
			if end := strings.Index(quoted, `"`); end >= 0 {
				msg = msg[:end+2]
			}
		}
		if len(msg) > 160 {
			msg = msg[:160] + "…"
		}
		counts[msg]++
	}
	msgs := slices.SortedFunc(maps.Keys(counts), func(a, b string) int { return counts[b] - counts[a] })
	msgs = msgs[:min(len(msgs), 5)]
	for i, m := range msgs {
		msgs[i] = fmt.Sprintf("%d× %s", counts[m], m)
	}
	return total, msgs, sc.Err()
}
