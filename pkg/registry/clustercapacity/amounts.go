package clustercapacity

import (
	"math/big"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// QuotasOf is what the committed quota rule reads of a namespace's
// mirrored quotas; an amount that does not parse is left out.
func QuotasOf(quotas []store.Quota) []Quota {
	parse := func(in map[string]string) map[string]resource.Quantity {
		out := make(map[string]resource.Quantity, len(in))
		for name, v := range in {
			if q, err := resource.ParseQuantity(v); err == nil {
				out[name] = q
			}
		}
		return out
	}
	out := make([]Quota, 0, len(quotas))
	for _, q := range quotas {
		out = append(out, Quota{Name: q.Name, Hard: parse(q.Hard), Used: parse(q.Used), Scoped: len(q.Scopes) > 0})
	}
	return out
}

// Amount is the registry's decimal amount of a quota resource in its
// base unit ("0.5" cores, "2147483648" bytes) as a quantity, in binary
// units for bytes (memory, ephemeral-storage, hugepages); zero for "" and
// for an amount that does not parse.
func Amount(quotaResource, decimal string) resource.Quantity {
	q, _ := amount(quotaResource, decimal)
	return q
}

// amount is Amount, and whether decimal parses.
func amount(quotaResource, decimal string) (resource.Quantity, bool) {
	q, err := resource.ParseQuantity(decimal)
	if err != nil {
		return resource.Quantity{}, false
	}
	if bytesOf(LimitedResource(quotaResource)) {
		q = *resource.NewDecimalQuantity(*q.AsDec(), resource.BinarySI)
	}
	return q, true
}

// Percent is part in percent of a positive whole, computed exactly and
// rounded down, or up with up (a bound checked against a share rounded up
// is never passed by a fraction of a percent).
func Percent(part, whole resource.Quantity, up bool) int64 {
	v := new(big.Rat).Mul(ratOf(part), big.NewRat(100, 1))
	v.Quo(v, ratOf(whole))
	q, r := new(big.Int).QuoRem(v.Num(), v.Denom(), new(big.Int))
	if up && r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 1<<63 - 1
	}
	return q.Int64()
}

// ratOf is a quantity as an exact rational.
func ratOf(q resource.Quantity) *big.Rat {
	r, _ := new(big.Rat).SetString(q.AsDec().String())
	return r
}

// NodeAmount is the amount of the node resource a quota resource limits
// in q (nodes' allocatable or requested: requests.cpu and limits.cpu read
// cpu), and whether q can hold it: false for a name that limits no node
// resource and for another resource q lacks.
func NodeAmount(quotaResource string, q store.Quantities) (resource.Quantity, bool) {
	switch r := LimitedResource(quotaResource); r {
	case "":
		return resource.Quantity{}, false
	case "cpu":
		return *resource.NewMilliQuantity(q.CPUMillis, resource.DecimalSI), true
	case "memory":
		return *resource.NewQuantity(q.MemoryBytes, resource.BinarySI), true
	case "pods":
		return *resource.NewQuantity(q.Pods, resource.DecimalSI), true
	default:
		v, ok := q.Other[r]
		format := resource.DecimalSI
		if bytesOf(r) {
			format = resource.BinarySI
		}
		return *resource.NewQuantity(v, format), ok
	}
}

// bytesOf says whether a node resource is counted in bytes.
func bytesOf(r string) bool {
	return r == "memory" || r == "ephemeral-storage" || strings.HasPrefix(r, "hugepages-")
}
