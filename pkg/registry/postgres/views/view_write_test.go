package views

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestBatchRowsAreJSON: a view's batch rows are the JSON encoding/json
// writes for each input column's value, whatever the strings hold.
func TestBatchRowsAreJSON(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 12, 2, 7, 30, 1, 123456000, time.FixedZone("x", 3600))
	nodes := []store.NodeCapacity{
		{Node: store.Node{Name: `n"1\`, UID: "ü\u2028\x01<>&", Labels: map[string]string{"a": `"q"`}, CreatedAt: created,
			Capacity: store.Quantities{CPUMillis: -1, MemoryBytes: 1 << 62, Pods: 110}, Ready: true,
			Conditions: []store.NodeCondition{{Type: "Ready", Status: "True"}}}},
		{Node: store.Node{Name: "n2"}}, // zero time, nil maps and slices
	}
	got, err := NodeCapacity.BatchRows(nodes)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(got, &rows); err != nil {
		t.Fatalf("batch rows are not JSON: %v\n%s", err, got)
	}
	for i, n := range nodes {
		want := map[string]any{}
		for _, c := range NodeCapacity.inputs() {
			b, err := json.Marshal(c.value(&n))
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			want[c.name] = v
		}
		if !reflect.DeepEqual(rows[i], want) {
			t.Errorf("row %d:\n got %v\nwant %v", i, rows[i], want)
		}
	}
}

func BenchmarkBatchRows(b *testing.B) {
	nodes := make([]store.NodeCapacity, 5000)
	for i := range nodes {
		nodes[i].Node = store.Node{Name: "node-" + string(rune('a'+i%26)), UID: "0f6c2b1e-9a7d-4c1e-8a55-3c2d1e0f9a7b",
			Labels:    map[string]string{"kubernetes.io/hostname": "node", "topology.kubernetes.io/zone": "zone-a"},
			CreatedAt: time.Now(), Capacity: store.Quantities{CPUMillis: 8000, MemoryBytes: 32 << 30, Pods: 110},
			Conditions: []store.NodeCondition{{Type: "Ready", Status: "True", Reason: "KubeletReady", Message: "kubelet is posting ready status"}}}
	}
	for b.Loop() {
		if _, err := NodeCapacity.BatchRows(nodes); err != nil {
			b.Fatal(err)
		}
	}
}
