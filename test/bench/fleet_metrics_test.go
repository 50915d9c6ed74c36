package bench

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// promHistogram is a Prometheus histogram's cumulative bucket counts by upper
// bound (+Inf included), possibly summed over series and replicas.
type promHistogram map[float64]float64

var labelRE = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// histogramsByOp parses the histogram name of body, one per value of its op
// label ("" when it has none).
func histogramsByOp(body, name string) map[string]promHistogram {
	out := map[string]promHistogram{}
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), name+"_bucket{")
		end := strings.LastIndexByte(rest, '}')
		if !ok || end < 0 {
			continue
		}
		labels := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(rest[:end], -1) {
			labels[m[1]] = m[2]
		}
		bound, err := strconv.ParseFloat(labels["le"], 64) // "+Inf" parses as +Inf
		fields := strings.Fields(rest[end+1:])
		if err != nil || len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			if out[labels["op"]] == nil {
				out[labels["op"]] = promHistogram{}
			}
			out[labels["op"]][bound] += v
		}
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

// lockSnapshot is one replica's commit-ticket hold and wait (the metrics
// named writer_lock_* from when one lock ordered the commits) and member-lock
// wait histograms, by op, and the seconds it has held tickets in all.
type lockSnapshot struct {
	histograms [3]map[string]promHistogram
	held       float64
}

// lockStats are the p99s in seconds (NaN without observations) of the
// commit tickets' hold and wait and the member lock's wait, summed over
// replicas and ops between two snapshots of each replica (before nil: since
// the process started), and each op's hold p99 and count, for the log.
type lockStats struct {
	hold, wait, memberWait float64
	byOp                   string
	// busy is the replicas' ticket hold seconds summed, over the window:
	// the views sections in flight on average (above 1 when they overlap;
	// under the one writer lock of before, the share of the time it was
	// held).
	busy float64
}

func newLockStats(before, after []lockSnapshot, window time.Duration) lockStats {
	sums := [3]promHistogram{{}, {}, {}}
	holdByOp := map[string]promHistogram{}
	var held float64
	for i, a := range after {
		var b lockSnapshot
		if before != nil {
			b = before[i]
		}
		held += a.held - b.held
		for k := range a.histograms {
			for op, h := range a.histograms[k] {
				sums[k].addDiff(h, b.histograms[k][op])
				if k == 0 {
					if holdByOp[op] == nil {
						holdByOp[op] = promHistogram{}
					}
					holdByOp[op].addDiff(h, b.histograms[k][op])
				}
			}
		}
	}
	s := lockStats{hold: sums[0].quantile(0.99), wait: sums[1].quantile(0.99), memberWait: sums[2].quantile(0.99), byOp: "none observed",
		busy: held / window.Seconds()}
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
