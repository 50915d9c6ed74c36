package bench

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"testing"
	"time"

	"github.com/example/platform-apiserver/test/framework"
)

const mib = 1 << 20

// latencies counts durations in log-linear buckets: exact below 1,024 µs,
// then 512 buckets per power of two (within 0.2 %), so millions of samples
// take a few KiB. The maximum is kept exactly.
type latencies struct {
	buckets []int64
	n       int64
	max     time.Duration
}

const histSub = 512 // buckets per power of two above 2·histSub µs

func histBucket(us uint64) int {
	if us < 2*histSub {
		return int(us)
	}
	shift := bits.Len64(us) - bits.Len64(histSub) // ≥ 1
	return 2*histSub + (shift-1)*histSub + int(us>>shift) - histSub
}

// histLower is the smallest duration in µs of bucket i.
func histLower(i int) uint64 {
	if i < 2*histSub {
		return uint64(i)
	}
	shift := (i-2*histSub)/histSub + 1
	return uint64((i-2*histSub)%histSub+histSub) << shift
}

func (h *latencies) add(ds ...time.Duration) {
	for _, d := range ds {
		d = max(d, 0)
		i := histBucket(uint64(d / time.Microsecond))
		if i >= len(h.buckets) {
			h.buckets = append(h.buckets, make([]int64, i+1-len(h.buckets))...)
		}
		h.buckets[i]++
		h.n++
		h.max = max(h.max, d)
	}
}

// quantile is the nearest-rank quantile q, to its bucket's lower bound; 1
// is the maximum.
func (h *latencies) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return h.max
	}
	rank := min(max(int64(math.Ceil(q*float64(h.n))), 1), h.n)
	var seen int64
	for i, c := range h.buckets {
		if seen += c; seen >= rank {
			return time.Duration(histLower(i)) * time.Microsecond
		}
	}
	return h.max
}

// loopLatencies runs op once per b.Loop iteration and collects its latencies.
func loopLatencies(b *testing.B, op func() ([]time.Duration, error)) *latencies {
	var h latencies
	for b.Loop() {
		got, err := op()
		must(b, err)
		h.add(got...)
	}
	return &h
}

// loopOnce runs f in b.Loop's first iteration and leaves the others empty:
// for an op that is one of its kind, or too long to repeat.
func loopOnce(b *testing.B, f func()) {
	for first := true; b.Loop(); first = false {
		if first {
			f()
		}
	}
}

// percentiles is a summary of latencies.
type percentiles struct {
	p50, p99, max time.Duration
	samples       int64
}

func (h *latencies) summary() percentiles {
	return percentiles{p50: h.quantile(0.50), p99: h.quantile(0.99), max: h.max, samples: h.n}
}

// report reports the p50 and p99 as <prefix>p50-ms and <prefix>p99-ms, and
// with withMax the maximum as <prefix>max-ms.
func (p percentiles) report(b *testing.B, prefix string, withMax bool) {
	b.ReportMetric(ms(p.p50), prefix+"p50-ms")
	b.ReportMetric(ms(p.p99), prefix+"p99-ms")
	if withMax {
		b.ReportMetric(ms(p.max), prefix+"max-ms")
	}
}

// String is the summary for the log, to the millisecond.
func (p percentiles) String() string {
	return fmt.Sprintf("p50 %s  p99 %s  max %s over %d", p.p50.Round(time.Millisecond), p.p99.Round(time.Millisecond), p.max.Round(time.Millisecond), p.samples)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// mibString formats a size in bytes as whole MiB.
func mibString(bytes int64) string { return fmt.Sprintf("%.0f MiB", float64(bytes)/mib) }

// counter is one sum of a server metric's series: name with labels.
type counter struct {
	dst    *float64
	name   string
	labels []string
}

// readCounters sets every counter from the metrics fetch returns.
func readCounters(ctx context.Context, fetch func(context.Context) (string, error), cs ...counter) error {
	body, err := fetch(ctx)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if *c.dst, err = framework.MetricSum(body, c.name, c.labels...); err != nil {
			return err
		}
	}
	return nil
}

// TestLatencies checks the histogram's nearest-rank quantiles: exact below
// 1,024 µs, within 0.2 % (rounded down) above, the maximum exact.
func TestLatencies(t *testing.T) {
	var h latencies
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	h.add(3*time.Second + 7*time.Microsecond)
	if got := h.quantile(0.5); got != 501*time.Microsecond {
		t.Errorf("p50 = %s, want 501µs", got)
	}
	if got := h.quantile(1); got != 3*time.Second+7*time.Microsecond {
		t.Errorf("max = %s, want 3.000007s", got)
	}
	if got := h.quantile(0.9999); got > 3*time.Second || got < 3*time.Second*998/1000 {
		t.Errorf("p99.99 = %s, want 3s within 0.2 %% below", got)
	}
	if s := h.summary(); s.samples != 1001 || s.p99 != 991*time.Microsecond {
		t.Errorf("summary %+v, want 1001 samples, p99 991µs", s)
	}
}
