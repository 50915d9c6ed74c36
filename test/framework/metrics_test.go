package framework

import "testing"

func TestMetricSums(t *testing.T) {
	body := "# HELP foo_total Foos.\n# TYPE foo_total counter\n" +
		"foo_total{op=\"a\",reason=\"x\"} 2\nfoo_total{op=\"b\"} 3\nfoo_total{loop=\"c\",op=\"a\"} 1\nfoo_total_other 9\nfoo_total 4\n"
	by, err := MetricSumBy(body, "foo_total", "op")
	if err != nil || len(by) != 3 || by["a"] != 3 || by["b"] != 3 || by[""] != 4 {
		t.Errorf("MetricSumBy by op = %v, %v; want a 3, b 3, (none) 4", by, err)
	}
	if v, err := MetricSum(body, "foo_total", `op="a"`); err != nil || v != 3 {
		t.Errorf(`MetricSum with op="a" = %v, %v; want 3`, v, err)
	}
	if v, err := MetricSum(body, "foo_total"); err != nil || v != 10 {
		t.Errorf("MetricSum = %v, %v; want 10 (not foo_total_other's 9)", v, err)
	}
	if _, err := MetricSum("foo_total{op=\"a\"} x\n", "foo_total"); err == nil {
		t.Error("MetricSum of an unparsable value: no error")
	}
}
