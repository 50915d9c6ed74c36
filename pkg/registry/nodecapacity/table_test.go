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

// TestTableExtended: -o wide shows available over allocatable per extended
// resource, not ephemeral-storage or hugepages; <none> without one.
func TestTableExtended(t *testing.T) {
	s := newStack(t, feed.Options{}, 0)
	gpu := nc("c", "gpu", nil)
	gpu.Node.Allocatable.Other = map[string]int64{"nvidia.com/gpu": 8, "example.com/fpga": 2, "ephemeral-storage": 100 << 30}
	gpu.Requested.Other = map[string]int64{"nvidia.com/gpu": 6}
	plain := nc("c", "plain", nil)
	list := &platform.NodeCapacityList{}
	for _, r := range []store.NodeCapacity{gpu, plain} {
		list.Items = append(list.Items, nodecapacity.ToObject(&r))
	}
	table, err := s.rest.ConvertToTable(t.Context(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := len(table.ColumnDefinitions) - 2
	if got := table.ColumnDefinitions[last]; got.Name != "Extended Free/Alloc" || got.Priority != 1 {
		t.Fatalf("last column = %+v, want Extended Free/Alloc with -o wide", got)
	}
	for i, want := range []string{"example.com/fpga=2/2,nvidia.com/gpu=2/8", "<none>"} {
		if got := table.Rows[i].Cells[last]; got != want {
			t.Errorf("row %s: %v, want %q", table.Rows[i].Cells[0], got, want)
		}
	}
}

// TestTableDevices: -o wide shows DRA devices per driver, free over total.
func TestTableDevices(t *testing.T) {
	s := newStack(t, feed.Options{}, 0)
	gpu := nc("c", "gpu", nil)
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
	if got := table.ColumnDefinitions[last]; got.Name != "Devices Free/Total" || got.Priority != 1 {
		t.Fatalf("last column = %+v, want Devices Free/Total with -o wide", got)
	}
	for i, want := range []string{"fpga.example.com=1/1,gpu.example.com=2/8", "<none>"} {
		if got := table.Rows[i].Cells[last]; got != want {
			t.Errorf("row %s: %v, want %q", table.Rows[i].Cells[0], got, want)
		}
	}
}
