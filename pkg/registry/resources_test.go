package registry

import (
	"reflect"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestAvailable(t *testing.T) {
	alloc := store.Quantities{CPUMillis: 4000, MemoryBytes: 8 << 30, Pods: 110, Other: map[string]int64{"nvidia.com/gpu": 8, "ephemeral-storage": 100 << 30}}
	req := store.Quantities{CPUMillis: 1500, MemoryBytes: 2 << 30, Pods: 3, Other: map[string]int64{"nvidia.com/gpu": 6, "example.com/fpga": 1}}
	got := Available(alloc, req)
	want := store.Quantities{CPUMillis: 2500, MemoryBytes: 6 << 30, Pods: 107,
		Other: map[string]int64{"nvidia.com/gpu": 2, "ephemeral-storage": 100 << 30, "example.com/fpga": -1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Available = %+v, want %+v", got, want)
	}
	if alloc.Other["nvidia.com/gpu"] != 8 {
		t.Error("Available changed allocatable")
	}
	if a := Available(store.Quantities{}, store.Quantities{}); a.Other != nil {
		t.Errorf("no other resources: Other = %v, want nil", a.Other)
	}
}

func TestOtherQuantities(t *testing.T) {
	got := OtherQuantities(map[string]int64{"nvidia.com/gpu": 8, "ephemeral-storage": 95 << 30, "hugepages-2Mi": 1 << 30})
	for name, want := range map[string]string{"nvidia.com/gpu": "8", "ephemeral-storage": "95Gi", "hugepages-2Mi": "1Gi"} {
		if q := got[name]; q.String() != want {
			t.Errorf("%s = %s, want %s", name, q.String(), want)
		}
	}
	if OtherQuantities(nil) != nil {
		t.Error("OtherQuantities(nil) is not nil")
	}
}
