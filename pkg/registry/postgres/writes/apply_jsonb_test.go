package writes_test

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Batches travel as one jsonb parameter (apply.go, jsonRows). These tests pin
// what that must not change: int64 quantities stay exact beyond 2^53 (where
// a float64 would round), and what PostgreSQL cannot store is rejected, one
// object at a time, so discovery's bisection can quarantine it.

const above2to53 = 1<<53 + 1 // 9007199254740993: no float64 holds it

// TestApplyKeepsLargeInt64: quantities above 2^53, up to MaxInt64, are stored,
// aggregated and reported exactly, and an unchanged re-apply stays a no-op.
func TestApplyKeepsLargeInt64(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	n := node("big", 4000, 1<<30)
	n.Capacity = store.Quantities{CPUMillis: above2to53, MemoryBytes: math.MaxInt64, Pods: above2to53 + 2}
	n.Allocatable = store.Quantities{CPUMillis: above2to53 - 2, MemoryBytes: math.MaxInt64 - 1, Pods: math.MinInt64}
	n.Capacity.Other = map[string]int64{"nvidia.com/gpu": above2to53, "example.com/big": math.MaxInt64}
	n.Allocatable.Other = map[string]int64{"nvidia.com/gpu": above2to53 - 2, "example.com/big": math.MaxInt64}
	p1, p2 := pod("a", "p1", "big", above2to53, above2to53+2), pod("a", "p2", "big", 2, 4)
	p1.OtherRequests = map[string]int64{"nvidia.com/gpu": above2to53, "example.com/big": math.MaxInt64}
	p2.OtherRequests = map[string]int64{"nvidia.com/gpu": 2, "example.com/big": math.MaxInt64}
	batch := store.Batch{ClusterID: "c",
		Namespaces: []store.Namespace{namespace("a")},
		Nodes:      []store.Node{n},
		Pods:       []store.Pod{p1, p2}, // the sums are above 2^53 too, and odd; example.com/big's beyond int64

	}
	mustApply(t, s, ctx, batch)

	got := getNode(t, s, ctx, "c", "big")
	if !reflect.DeepEqual(got.Node.Capacity, n.Capacity) || !reflect.DeepEqual(got.Node.Allocatable, n.Allocatable) {
		t.Errorf("capacity %+v, allocatable %+v; want %+v, %+v", got.Node.Capacity, got.Node.Allocatable, n.Capacity, n.Allocatable)
	}
	want := store.Quantities{CPUMillis: above2to53 + 2, MemoryBytes: above2to53 + 6, Pods: 2,
		Other: map[string]int64{"nvidia.com/gpu": above2to53 + 2, "example.com/big": math.MaxInt64}}
	if !reflect.DeepEqual(got.Requested, want) {
		t.Errorf("node requests %+v, want %+v", got.Requested, want)
	}
	ns := getNamespace(t, s, ctx, "c", "a")
	if !reflect.DeepEqual(ns.Requested, want) {
		t.Errorf("namespace requests %+v, want %+v", ns.Requested, want)
	}

	rv := registryRV(t, s, ctx)
	mustApply(t, s, ctx, batch)
	if after := registryRV(t, s, ctx); after != rv {
		t.Errorf("re-applying the same batch moved the registry from %d to %d", rv, after)
	}

	at := time.Date(2025, 1, 2, 4, 0, 0, 123456789, time.UTC)
	sample := store.NodeMetricsSample{ClusterID: "c", Node: "big", CPUNanoCores: above2to53, MemoryBytes: math.MaxInt64 - 3,
		ObservedAt: at, Window: 1500 * time.Millisecond}
	if _, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, []store.NodeMetricsSample{sample}, reportEvery); err != nil {
		t.Fatal(err)
	}
	u := getNode(t, s, ctx, "c", "big").Usage
	wantUsage := store.Usage{CPUNanoCores: above2to53, MemoryBytes: math.MaxInt64 - 3, Timestamp: at.Truncate(time.Microsecond), Window: 1500 * time.Millisecond}
	if u == nil || u.CPUNanoCores != wantUsage.CPUNanoCores || u.MemoryBytes != wantUsage.MemoryBytes ||
		!u.Timestamp.Equal(wantUsage.Timestamp) || u.Window != wantUsage.Window {
		t.Errorf("usage %+v, want %+v", u, wantUsage)
	}
}

// TestApplyRejectsBadTextPerObject: a NUL character (which jsonb rejects, in
// a text column as in a jsonb one) or invalid UTF-8 anywhere in a batch fails
// it with store.ErrRejected and writes nothing of it; bisecting the batch as
// discovery does finds exactly the bad object, and the rest commits.
func TestApplyRejectsBadTextPerObject(t *testing.T) {
	t.Parallel()
	bad := map[string]func(*store.Batch){
		"NUL in a node name":         func(b *store.Batch) { b.Nodes[1].Name = "n\x001" },
		"NUL in a node label":        func(b *store.Batch) { b.Nodes[1].Labels = map[string]string{"k": "v\x00"} },
		"NUL in a taint":             func(b *store.Batch) { b.Nodes[1].Taints = []store.Taint{{Key: "k\x00", Effect: "NoSchedule"}} },
		"NUL in a namespace label":   func(b *store.Batch) { b.Namespaces[1].Labels = map[string]string{"k\x00": "v"} },
		"NUL in a pod's node":        func(b *store.Batch) { b.Pods[1].NodeName = "n\x00" },
		"NUL in a pod phase":         func(b *store.Batch) { b.Pods[1].Phase = "Running\x00" },
		"NUL in a quota":             func(b *store.Batch) { b.Quotas[1].Hard = map[string]string{"pods": "1\x00"} },
		"invalid UTF-8 in a pod":     func(b *store.Batch) { b.Pods[1].Name = "p\xff" },
		"invalid UTF-8 in a node":    func(b *store.Batch) { b.Nodes[1].UID = "\xc3\x28" },
		"invalid UTF-8 in a deleted": func(b *store.Batch) { b.Deleted = store.Keys{store.ResourcePods: {{Namespace: "a", Name: "\xff"}}} },
	}
	for name, mutate := range bad {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, b := setup(t, postgres.Options{})
			ctx := b.Ctx
			batch := store.Batch{ClusterID: "c",
				Namespaces: []store.Namespace{namespace("a"), namespace("b")},
				Nodes:      []store.Node{node("n0", 1000, 1<<30), node("n1", 1000, 1<<30), node("n2", 1000, 1<<30)},
				Pods:       []store.Pod{pod("a", "p0", "n0", 1, 1), pod("a", "p1", "n1", 1, 1), pod("b", "p2", "n2", 1, 1)},
				Quotas: []store.Quota{{Namespace: "a", Name: "q0", Hard: map[string]string{"pods": "10"}},
					{Namespace: "b", Name: "q1", Hard: map[string]string{"pods": "10"}}},
			}
			mutate(&batch)
			before := registryRV(t, s, ctx)
			if err := s.Apply(ctx, batch); !errors.Is(err, store.ErrRejected) {
				t.Fatalf("Apply: %v; want ErrRejected", err)
			}
			if after := registryRV(t, s, ctx); after != before {
				t.Errorf("a rejected batch moved the registry from version %d to %d", before, after)
			}
			// Bisect one object at a time, as discovery does.
			var rejected []string
			for _, part := range splitBatch(batch) {
				switch err := s.Apply(ctx, part.batch); {
				case errors.Is(err, store.ErrRejected):
					rejected = append(rejected, part.what)
				case err != nil:
					t.Fatalf("Apply of %s: %v", part.what, err)
				}
			}
			if len(rejected) != 1 {
				t.Errorf("rejected %v; want exactly the bad object", rejected)
			}
		})
	}
}

type batchPart struct {
	what  string
	batch store.Batch
}

// splitBatch returns a batch per object of b.
func splitBatch(b store.Batch) []batchPart {
	var out []batchPart
	one := func(what string, set func(*store.Batch)) {
		part := store.Batch{ClusterID: b.ClusterID}
		set(&part)
		out = append(out, batchPart{what: what, batch: part})
	}
	for _, n := range b.Namespaces {
		one("namespace "+n.Name, func(p *store.Batch) { p.Namespaces = []store.Namespace{n} })
	}
	for _, n := range b.Nodes {
		one("node "+n.Name, func(p *store.Batch) { p.Nodes = []store.Node{n} })
	}
	for _, x := range b.Pods {
		one("pod "+x.Name, func(p *store.Batch) { p.Pods = []store.Pod{x} })
	}
	for _, q := range b.Quotas {
		one("quota "+q.Name, func(p *store.Batch) { p.Quotas = []store.Quota{q} })
	}
	for _, k := range b.Deleted[store.ResourcePods] {
		one("deleted pod "+k.Name, func(p *store.Batch) { p.Deleted = store.Keys{store.ResourcePods: {k}} })
	}
	return out
}
