package units

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestUnits: as kubectl top prints them, rounded to the nearest millicore
// and MiB.
func TestUnits(t *testing.T) {
	for _, tc := range []struct {
		got  resource.Quantity
		want string
	}{
		{CPU(914995400), "915m"}, {CPU(914499999), "914m"}, {CPU(0), "0"}, {CPU(400_000), "0"}, {CPU(500_000), "1m"}, {CPU(3e9), "3"},
		{Memory(1707116258), "1628Mi"}, {Memory(0), "0"}, {Memory(1 << 19), "1Mi"}, {Memory(1<<19 - 1), "0"}, {Memory(3 << 30), "3Gi"},
	} {
		if tc.got.String() != tc.want {
			t.Errorf("%s, want %s", tc.got.String(), tc.want)
		}
	}
}
