package writes_test

import (
	"fmt"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// benchQuotaNamespaces is how many namespaces of BenchmarkApplyQuotas'
// member have quotas (two each).
const benchQuotaNamespaces = 500

// BenchmarkApplyQuotas measures the writes the committed quota (migration
// 030) adds to: a member of benchQuotaNamespaces namespaces with two
// ResourceQuotas each. quotas=used: a batch changing every quota's used
// (1,000 quotas, 500 namespace rows whose quotas the ClusterCapacity
// trigger reads); pods=100: a batch of 100 pods in 100 of those namespaces,
// whose rows change with their quotas as they were (the trigger's
// grouping cancels them before any quota is read). docs/benchmarks.md.
func BenchmarkApplyQuotas(b *testing.B) {
	for _, bc := range []struct {
		name    string
		batches [2]store.Batch
		rows    func(store.Batch) int
	}{
		{"quotas=used", [2]store.Batch{{ClusterID: "q", Quotas: benchQuotas(1)}, {ClusterID: "q", Quotas: benchQuotas(0)}},
			func(b store.Batch) int { return len(b.Quotas) }},
		{"pods=100", [2]store.Batch{benchQuotaPods(1), benchQuotaPods(0)}, func(b store.Batch) int { return len(b.Pods) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, dsn := benchStore(b)
			ctx := b.Context()
			base := store.Batch{ClusterID: "q", Quotas: benchQuotas(0)}
			for i := range benchQuotaNamespaces {
				base.Namespaces = append(base.Namespaces, benchNamespace(i))
			}
			benchApply(b, s, ctx, base)
			benchAnalyze(b, dsn)
			i := 0
			for b.Loop() {
				benchApply(b, s, ctx, bc.batches[i%2])
				i++
			}
			reportPerRow(b, bc.rows(bc.batches[0]))
		})
	}
}

// benchQuotas are two quotas in each of the first benchQuotaNamespaces
// namespaces, their used differing between versions.
func benchQuotas(version int) []store.Quota {
	var out []store.Quota
	for i := range benchQuotaNamespaces {
		ns := fmt.Sprintf("team-%02d", i)
		out = append(out,
			store.Quota{Namespace: ns, Name: "compute",
				Hard: map[string]string{"requests.cpu": "8", "requests.memory": "32Gi", "pods": "50", "count/configmaps": "20"},
				Used: map[string]string{"requests.cpu": fmt.Sprintf("%dm", 1500+version), "requests.memory": "4Gi", "pods": "6", "count/configmaps": "3"}},
			store.Quota{Namespace: ns, Name: "limits",
				Hard: map[string]string{"limits.cpu": "16", "limits.memory": "64Gi", "requests.nvidia.com/gpu": "2"},
				Used: map[string]string{"limits.cpu": fmt.Sprintf("%dm", 3000+version), "limits.memory": "8Gi", "requests.nvidia.com/gpu": "1"}})
	}
	return out
}

// benchQuotaPods are 100 unscheduled pods, one in each of 100 of the
// quota namespaces, present in version 1 and terminal in version 0.
func benchQuotaPods(version int) store.Batch {
	batch := store.Batch{ClusterID: "q"}
	for i := range 100 {
		p := store.Pod{Namespace: fmt.Sprintf("team-%02d", i*5), Name: fmt.Sprintf("pod-%03d", i), UID: fmt.Sprintf("uid-q-%03d", i),
			Phase: "Running", CPURequestMillis: 100, MemoryRequestBytes: 128 << 20}
		if version == 0 {
			p.Phase = "Succeeded"
		}
		batch.Pods = append(batch.Pods, p)
	}
	return batch
}
