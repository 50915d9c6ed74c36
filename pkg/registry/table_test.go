package registry

import "testing"

func TestFormatting(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"cpu ratio shares a unit", Ratio(MilliCPU(1000), MilliCPU(3920), 1000, 3920), "1000m/3920m (25%)"},
		{"zero denominator has no percent", Ratio(MilliCPU(0), MilliCPU(0), 0, 0), "0m/0m"},
		{"bytes exact", Bytes(16 << 30), "16Gi"},
		{"bytes fraction", Bytes(1536 << 20), "1.5Gi"},
		{"bytes small", Bytes(512), "512"},
		{"bytes kibi", Bytes(2048), "2Ki"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}
