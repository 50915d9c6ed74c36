package bench

import (
	"testing"
	"time"
)

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
