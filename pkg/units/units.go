// Package units writes resource amounts as kubectl top prints them: CPU in
// millicores, memory in MiB, each rounded to the nearest.
package units

import "k8s.io/apimachinery/pkg/api/resource"

// CPU is nanocores in millicores, rounded to the nearest (915m).
func CPU(nanocores int64) resource.Quantity {
	return *resource.NewMilliQuantity(roundDiv(nanocores, 1e6), resource.DecimalSI)
}

// Memory is bytes in MiB, rounded to the nearest (1628Mi).
func Memory(bytes int64) resource.Quantity {
	return *resource.NewQuantity(roundDiv(bytes, 1<<20)<<20, resource.BinarySI)
}

// roundDiv is v/d rounded half away from zero, for v >= 0.
func roundDiv(v, d int64) int64 { return (v + d/2) / d }
