package nodecapacity_test

import (
	"testing"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/feed"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestTableReason: the Reason column follows SCHEDULABLE and shows the
// record's reason, <none> for a schedulable node.
func TestTableReason(t *testing.T) {
	s := newStack(t, feed.Options{}, 0)
	ready := nc("c", "ready", nil)
	ready.Schedulable = true
	cordoned := nc("c", "cordoned", nil)
	cordoned.Node.Unschedulable, cordoned.UnschedulableReason = true, store.ReasonCordoned
	notReady := nc("c", "notready", nil)
	notReady.Node.Ready, notReady.UnschedulableReason = false, store.ReasonNotReady
	list := &platform.NodeCapacityList{}
	for _, r := range []store.NodeCapacity{ready, cordoned, notReady} {
		list.Items = append(list.Items, nodecapacity.ToObject(&r))
	}
	table, err := s.rest.ConvertToTable(t.Context(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := table.ColumnDefinitions[2]; got.Name != "Reason" || got.Priority != 0 {
		t.Fatalf("column 2 = %+v, want Reason shown without -o wide", got)
	}
	want := []struct {
		schedulable bool
		reason      string
	}{{true, "<none>"}, {false, "Cordoned"}, {false, "NotReady"}}
	for i, row := range table.Rows {
		if row.Cells[1] != want[i].schedulable || row.Cells[2] != want[i].reason {
			t.Errorf("row %s: schedulable %v reason %v, want %v %q", row.Cells[0], row.Cells[1], row.Cells[2], want[i].schedulable, want[i].reason)
		}
	}
}

// TestTableResources: -o wide shows available over allocatable per extended
// resource (not ephemeral-storage or hugepages) and free over total DRA
// devices per driver; <none> without any.
func TestTableResources(t *testing.T) {
	s := newStack(t, feed.Options{}, 0)
	gpu := nc("c", "gpu", nil)
	gpu.Node.Allocatable.Other = map[string]int64{"nvidia.com/gpu": 8, "example.com/fpga": 2, "ephemeral-storage": 100 << 30}
	gpu.Requested.Other = map[string]int64{"nvidia.com/gpu": 6}
	gpu.Devices = map[string]store.DeviceCount{"gpu.example.com": {Total: 8, Allocated: 6}, "fpga.example.com": {Total: 1}}
	plain := nc("c", "plain", nil)
	list := &platform.NodeCapacityList{}
	for _, r := range []store.NodeCapacity{gpu, plain} {
		list.Items = append(list.Items, nodecapacity.ToObject(&r))
	}
	table, err := s.rest.ConvertToTable(t.Context(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := len(table.ColumnDefinitions) - 1
	for col, want := range map[string][]string{
		"Extended Free/Alloc": {"example.com/fpga=2/2,nvidia.com/gpu=2/8", "<none>"},
		"Devices Free/Total":  {"fpga.example.com=1/1,gpu.example.com=2/8", "<none>"},
	} {
		i := map[string]int{"Extended Free/Alloc": last - 1, "Devices Free/Total": last}[col]
		if got := table.ColumnDefinitions[i]; got.Name != col || got.Priority != 1 {
			t.Fatalf("column %d = %+v, want %s with -o wide", i, got, col)
		}
		for row, cell := range want {
			if got := table.Rows[row].Cells[i]; got != cell {
				t.Errorf("%s of row %s: %v, want %q", col, table.Rows[row].Cells[0], got, cell)
			}
		}
	}
}
