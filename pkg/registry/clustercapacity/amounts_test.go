package clustercapacity

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPercent: exact, rounded down or up, at and beside a whole percent.
func TestPercent(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		part, whole  string
		down, upward int64
	}{
		{"10", "10", 100, 100},
		{"6", "3920m", 153, 154},
		{"10000000001", "10000000000", 100, 101}, // a hundred-millionth over
		{"0", "8", 0, 0},
		{"38Gi", "40Gi", 95, 95},
	} {
		if got := Percent(q(tc.part), q(tc.whole), false); got != tc.down {
			t.Errorf("Percent(%s, %s) down = %d, want %d", tc.part, tc.whole, got, tc.down)
		}
		if got := Percent(q(tc.part), q(tc.whole), true); got != tc.upward {
			t.Errorf("Percent(%s, %s) up = %d, want %d", tc.part, tc.whole, got, tc.upward)
		}
	}
}
