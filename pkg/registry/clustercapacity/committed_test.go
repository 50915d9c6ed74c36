package clustercapacity

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func quantities(kv ...string) map[string]resource.Quantity {
	out := map[string]resource.Quantity{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = resource.MustParse(kv[i+1])
	}
	return out
}

// TestNamespaceCommitment: the rule as quota admission decides: quotas of
// one namespace do not add up (a pod must fit each that matches it), so
// the least unscoped hard binds; scoped ones count apart, summed, only
// where no unscoped quota limits the resource.
func TestNamespaceCommitment(t *testing.T) {
	tests := []struct {
		name   string
		quotas []Quota
		want   Commitment
	}{
		{name: "no quota"},
		{name: "one quota; objects and PVC storage commit nothing on pods",
			quotas: []Quota{{Name: "q", Hard: quantities("requests.cpu", "4", "pods", "10", "count/configmaps", "3", "requests.storage", "1Ti", "services", "2"),
				Used: quantities("requests.cpu", "1500m", "pods", "2")}},
			want: Commitment{Hard: quantities("requests.cpu", "4", "pods", "10"), Used: quantities("requests.cpu", "1500m", "pods", "2")}},
		{name: "bare names count as requests",
			quotas: []Quota{{Name: "q", Hard: quantities("cpu", "2", "memory", "1Gi", "ephemeral-storage", "10Gi"), Used: quantities("cpu", "1")}},
			want:   Commitment{Hard: quantities("requests.cpu", "2", "requests.memory", "1Gi", "requests.ephemeral-storage", "10Gi"), Used: quantities("requests.cpu", "1")}},
		{name: "cpu and requests.cpu in one quota: the lesser",
			quotas: []Quota{{Name: "q", Hard: quantities("cpu", "3", "requests.cpu", "2"), Used: quantities("cpu", "1", "requests.cpu", "1")}},
			want:   Commitment{Hard: quantities("requests.cpu", "2"), Used: quantities("requests.cpu", "1")}},
		{name: "two unscoped quotas: the least hard per resource, with its used",
			quotas: []Quota{
				{Name: "a", Hard: quantities("requests.cpu", "8", "requests.memory", "4Gi"), Used: quantities("requests.cpu", "3", "requests.memory", "1Gi")},
				{Name: "b", Hard: quantities("requests.cpu", "6", "limits.cpu", "12"), Used: quantities("requests.cpu", "3", "limits.cpu", "5")}},
			want: Commitment{Hard: quantities("requests.cpu", "6", "requests.memory", "4Gi", "limits.cpu", "12"),
				Used: quantities("requests.cpu", "3", "requests.memory", "1Gi", "limits.cpu", "5")}},
		{name: "scoped only: summed apart",
			quotas: []Quota{
				{Name: "high", Scoped: true, Hard: quantities("requests.cpu", "4", "requests.nvidia.com/gpu", "2"), Used: quantities("requests.cpu", "1")},
				{Name: "low", Scoped: true, Hard: quantities("requests.cpu", "2"), Used: quantities("requests.cpu", "2")}},
			want: Commitment{ScopedHard: quantities("requests.cpu", "6", "requests.nvidia.com/gpu", "2"), ScopedUsed: quantities("requests.cpu", "3")}},
		{name: "an unscoped quota bounds the namespace: scoped ones for the same resource do not count, even if less",
			quotas: []Quota{
				{Name: "all", Hard: quantities("requests.cpu", "10"), Used: quantities("requests.cpu", "4")},
				{Name: "best-effort", Scoped: true, Hard: quantities("pods", "5"), Used: quantities("pods", "1")},
				{Name: "high", Scoped: true, Hard: quantities("requests.cpu", "2"), Used: quantities("requests.cpu", "1")}},
			want: Commitment{Hard: quantities("requests.cpu", "10"), Used: quantities("requests.cpu", "4"),
				ScopedHard: quantities("pods", "5"), ScopedUsed: quantities("pods", "1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NamespaceCommitment(tt.quotas); !got.Equal(tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	// Namespaces add up; a sum back to zero is left out.
	got := MemberCommitment([][]Quota{
		{{Name: "q", Hard: quantities("requests.cpu", "1500m")}},
		{{Name: "q", Hard: quantities("requests.cpu", "2500m", "pods", "3")}},
		{{Name: "q", Hard: quantities("pods", "0")}},
	})
	if want := (Commitment{Hard: quantities("requests.cpu", "4", "pods", "3")}); !got.Equal(want) {
		t.Errorf("member: got %+v, want %+v", got, want)
	}
}

// TestCommittedConversion: the registry's decimal amounts become
// quantities in the units people read, each Hard in percent of the
// schedulable allocatable it limits (rounded down), none where the nodes
// have none of it; no quota, no committed.
func TestCommittedConversion(t *testing.T) {
	r := record() // 64 schedulable cores, 256Gi, 330 pods
	if o := ToObject(&r); o.Status.Committed != nil {
		t.Errorf("no quota: committed %+v, want none", o.Status.Committed)
	}
	r.Schedulable.Allocatable.Other = map[string]int64{"nvidia.com/gpu": 8}
	r.Committed = store.QuotaCommitment{
		Hard: map[string]string{"requests.cpu": "80", "limits.cpu": "160.5", "requests.memory": "274877906944", "pods": "100",
			"requests.nvidia.com/gpu": "4", "requests.ephemeral-storage": "1099511627776"},
		Used:       map[string]string{"requests.cpu": "12.25", "requests.memory": "1073741824"},
		ScopedHard: map[string]string{"requests.hugepages-2Mi": "2147483648"},
		ScopedUsed: map[string]string{"requests.hugepages-2Mi": "0.5"},
	}
	c := ToObject(&r).Status.Committed
	if c == nil {
		t.Fatal("no committed")
	}
	wantText := map[string]map[string]string{
		"hard": {"requests.cpu": "80", "limits.cpu": "160500m", "requests.memory": "256Gi", "pods": "100",
			"requests.nvidia.com/gpu": "4", "requests.ephemeral-storage": "1Ti"},
		"used":       {"requests.cpu": "12250m", "requests.memory": "1Gi"},
		"scopedHard": {"requests.hugepages-2Mi": "2Gi"},
		"scopedUsed": {"requests.hugepages-2Mi": "500m"},
	}
	for name, got := range map[string]map[string]resource.Quantity{"hard": c.Hard, "used": c.Used, "scopedHard": c.ScopedHard, "scopedUsed": c.ScopedUsed} {
		text := map[string]string{}
		for k, q := range got {
			text[k] = q.String()
		}
		if !reflect.DeepEqual(text, wantText[name]) {
			t.Errorf("%s: %v, want %v", name, text, wantText[name])
		}
	}
	want := map[string]int64{"requests.cpu": 125, "limits.cpu": 250, "requests.memory": 100, "pods": 30, "requests.nvidia.com/gpu": 50}
	if !reflect.DeepEqual(c.PercentOfAllocatable, want) {
		t.Errorf("percent of allocatable %v, want %v (none for ephemeral-storage, which the nodes do not list)", c.PercentOfAllocatable, want)
	}

	// -o wide: requests over the schedulable allocatable, in percent.
	rest := NewREST(store.Source[store.ClusterCapacity]{Kind: store.KindClusterCapacity}, registry.WatchConfig{}, registry.MemberStaleness{})
	none := record()
	none.ClusterID = "no-quota"
	table, err := rest.ConvertToTable(context.Background(), &platform.ClusterCapacityList{Items: []platform.ClusterCapacity{ToObject(&r), ToObject(&none)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cells := map[string][]any{}
	for i, col := range table.ColumnDefinitions {
		for _, row := range table.Rows {
			cells[col.Name] = append(cells[col.Name], row.Cells[i])
		}
	}
	if got, want := cells["CPU Committed"], []any{"80/64 (125%)", "<none>"}; !reflect.DeepEqual(got, want) {
		t.Errorf("CPU Committed %v, want %v", got, want)
	}
	if got, want := cells["Mem Committed"], []any{"256Gi/256Gi (100%)", "<none>"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Mem Committed %v, want %v", got, want)
	}
}
