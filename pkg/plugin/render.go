package plugin

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/units"
)

// pair is a resource's requests and allocatable; nil where unknown (a
// namespace has no allocatable).
type pair struct{ requested, allocatable *resource.Quantity }

// reference is what the usage is drawn next to.
type reference struct{ cpu, memory pair }

// slotRange is the steps a window covers: from the step holding the first
// hour the window overlaps to the one holding the time it was asked, n in
// all, aligned to multiples of the step since the epoch as the server's
// buckets are.
type slotRange struct {
	first time.Time
	n     int
}

func slots(asked time.Time, window, step time.Duration) slotRange {
	epoch := time.Unix(0, 0).UTC()
	from := asked.Add(-window).UTC().Truncate(time.Hour)
	first := epoch.Add(from.Sub(epoch).Truncate(step))
	return slotRange{first: first, n: int(asked.Sub(first)/step) + 1}
}

// usageView is one report as printed.
type usageView struct {
	subject string
	perNode bool // the figures are per node (a member, a selection)
	ref     reference
	status  v1alpha1.UsageReportStatus
	slots   slotRange
	step    time.Duration
}

// render prints v: a line saying what and when, then a row per resource.
func render(w io.Writer, v usageView) error {
	st := v.status
	switch {
	case st.Samples == 0 || st.From == nil || st.To == nil:
		fmt.Fprintf(w, "%s: no samples in the window\n", v.subject)
	case v.perNode:
		fmt.Fprintf(w, "%s: %d samples of %d nodes, %s to %s UTC, per node\n", v.subject, st.Samples, st.Nodes, when(st.From.Time), when(st.To.Time))
	default:
		fmt.Fprintf(w, "%s: %d samples, %s to %s UTC\n", v.subject, st.Samples, when(st.From.Time), when(st.To.Time))
	}
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintf(tw, "RESOURCE\tREQUESTED\tALLOCATABLE\tAVERAGE\tP95\tMAX\tAVERAGE EACH %s, OLDEST FIRST\n", short(v.step))
	averages := func(get func(v1alpha1.UsageBucket) resource.Quantity) map[time.Time]float64 {
		m := make(map[time.Time]float64, len(st.Series))
		for _, b := range st.Series {
			q := get(b)
			m[b.Start.UTC()] = q.AsApproximateFloat64()
		}
		return m
	}
	for _, r := range []struct {
		name  string
		ref   pair
		stats *v1alpha1.UsageStatistics
		avg   map[time.Time]float64
		unit  func(float64) resource.Quantity // a value in the resource's unit
	}{
		{"cpu", v.ref.cpu, st.CPU, averages(func(b v1alpha1.UsageBucket) resource.Quantity { return b.CPU.Average }),
			func(cores float64) resource.Quantity { return units.CPU(int64(math.Round(cores * 1e9))) }},
		{"memory", v.ref.memory, st.Memory, averages(func(b v1alpha1.UsageBucket) resource.Quantity { return b.Memory.Average }),
			func(bytes float64) resource.Quantity { return units.Memory(int64(math.Round(bytes))) }},
	} {
		average, p95, maximum := "-", "-", "-"
		if r.stats != nil {
			average, p95, maximum = r.stats.Average.String(), r.stats.P95.String(), r.stats.Max.String()
		}
		top := scale(r.ref, r.avg)
		topText := r.unit(top)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s  █ = %s\n", r.name, text(r.ref.requested), text(r.ref.allocatable), average, p95, maximum,
			sparkline(r.avg, v.slots, v.step, top), topText.String())
	}
	return tw.Flush()
}

// scale is the top of a sparkline: the allocatable where known, so the
// line shows how full the nodes are; else the larger of the requests and
// the highest average.
func scale(ref pair, averages map[time.Time]float64) float64 {
	if ref.allocatable != nil && ref.allocatable.Sign() > 0 {
		return ref.allocatable.AsApproximateFloat64()
	}
	var top float64
	if ref.requested != nil {
		top = ref.requested.AsApproximateFloat64()
	}
	for _, a := range averages {
		top = max(top, a)
	}
	return top
}

const levels = "▁▂▃▄▅▆▇█"

// sparkline draws the averages slot by slot against top (· where a slot
// has no samples).
func sparkline(averages map[time.Time]float64, s slotRange, step time.Duration, top float64) string {
	bars := []rune(levels)
	var b strings.Builder
	for i := range s.n {
		a, ok := averages[s.first.Add(time.Duration(i)*step)]
		switch {
		case !ok:
			b.WriteRune('·')
		case top <= 0:
			b.WriteRune(bars[0])
		default:
			b.WriteRune(bars[min(max(int(math.Round(a/top*float64(len(bars)-1))), 0), len(bars)-1)])
		}
	}
	return b.String()
}

func text(q *resource.Quantity) string {
	if q == nil {
		return "-"
	}
	return q.String()
}

func when(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") }

// short is a duration as people write it: 1h, 24h, 90m.
func short(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "0m")
}
