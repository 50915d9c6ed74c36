package registry_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/feed/feedtest"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

const gpuFree = "status.available.other.nvidia.com/gpu"

// TestKeyedFieldRequirements: a keyed amount's path splits into its
// prefix's field and a resource name, its value is a quantity normalized
// to a whole number, and anything else is a 400 that says what is wrong
// with an example; the scheme's check answers the same.
func TestKeyedFieldRequirements(t *testing.T) {
	table := nodecapacity.Kind.FieldTable()
	conv := nodecapacity.Kind.Declaration().FieldLabelConversion
	for _, tc := range []struct {
		path, value string
		key, want   string
		amount      store.Amount
	}{
		{path: gpuFree, value: "0", key: "nvidia.com/gpu", want: "0", amount: store.Amount{Column: "allocatable_other", Minus: "requested_other"}},
		{path: gpuFree, value: "8", key: "nvidia.com/gpu", want: "8", amount: store.Amount{Column: "allocatable_other", Minus: "requested_other"}},
		{path: "status.allocatable.other.hugepages-2Mi", value: "1Gi", key: "hugepages-2Mi", want: "1073741824", amount: store.Amount{Column: "allocatable_other"}},
		{path: "status.allocatable.other.ephemeral-storage", value: "100G", key: "ephemeral-storage", want: "100000000000", amount: store.Amount{Column: "allocatable_other"}},
		{path: "status.requested.other.example.com/fpga", value: "2k", key: "example.com/fpga", want: "2000", amount: store.Amount{Column: "requested_other"}},
		{path: gpuFree, value: "0.5", key: "nvidia.com/gpu", want: "1", amount: store.Amount{Column: "allocatable_other", Minus: "requested_other"}}, // rounded up, as Quantity.Value
		{path: gpuFree, value: "-1", key: "nvidia.com/gpu", want: "-1", amount: store.Amount{Column: "allocatable_other", Minus: "requested_other"}}, // overcommitted
	} {
		req, err := table.Requirement(tc.path, selection.NotEquals, tc.value)
		if err != nil {
			t.Errorf("%s!=%s: %v", tc.path, tc.value, err)
			continue
		}
		if req.Key != tc.key || req.Value != tc.want || req.Op != selection.NotEquals || req.Field.Amount == nil || *req.Field.Amount != tc.amount ||
			req.Field.Path != strings.TrimSuffix(tc.path, tc.key) {
			t.Errorf("%s!=%s: %+v (amount %+v), want key %s, value %s, amount %+v", tc.path, tc.value, req, req.Field.Amount, tc.key, tc.want, tc.amount)
		}
		if label, value, err := conv(tc.path, tc.value); err != nil || label != tc.path || value != tc.want {
			t.Errorf("scheme check of %s=%s: %s=%s, %v, want %s", tc.path, tc.value, label, value, err, tc.want)
		}
	}

	for _, tc := range []struct{ path, value, want string }{
		{gpuFree, "lots", `field selector status.available.other.nvidia.com/gpu: value "lots" is not a quantity; use a whole number or a quantity such as 8, 500Mi or 1Gi`},
		{gpuFree, "", `value "" is not a quantity`},
		{gpuFree, "100E", `value "100E" is out of range; amounts are int64s, e.g. 8 or 1Gi`},
		{"status.allocatable.other.", "1", `field selector "status.allocatable.other." needs a resource name after the prefix, e.g. status.allocatable.other.nvidia.com/gpu`},
		{"status.available.other.nvidia.com/", "1", `"nvidia.com/" is not a valid resource name (`},
		{"status.available.other.gpu!", "1", `"gpu!" is not a valid resource name (`},
		{"status.available.other.Bad_Name-", "1", `e.g. status.available.other.nvidia.com/gpu`},
		{"status.devices.free.GPU_vendor", "1", `"GPU_vendor" is not a valid DRA driver name (`},
		{"status.available.cpu", "1", "supported field selectors: metadata.name, status.allocatable.other.<resource name>, status.available.other.<resource name>, status.cluster, " +
			"status.devices.free.<DRA driver name>, status.devices.total.<DRA driver name>, status.nodeName, status.requested.other.<resource name>, status.schedulable, status.unschedulableReason"},
	} {
		_, err := table.Requirement(tc.path, selection.Equals, tc.value)
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want 400 saying %q", tc.path, tc.value, err, tc.want)
		}
		if _, _, convErr := conv(tc.path, tc.value); convErr == nil || err == nil || convErr.Error() != err.Error() {
			t.Errorf("scheme check of %s=%s: %v, want %v", tc.path, tc.value, convErr, err)
		}
	}
	if _, err := table.Requirement(gpuFree, selection.In, "1"); err != nil {
		t.Errorf("the value check leaves the operator to the store: %v", err)
	}
}

// gpuNode is a node of cluster c1 with the GPUs, hugepages (bytes) and
// requested GPUs given.
func gpuNode(name string, gpus, hugepages, requested int64) store.NodeCapacity {
	nc := widgetNode("c1", name, true)
	nc.Schedulable = true
	nc.Node.Allocatable.Other = map[string]int64{}
	if gpus > 0 {
		nc.Node.Allocatable.Other["nvidia.com/gpu"] = gpus
	}
	if hugepages > 0 {
		nc.Node.Allocatable.Other["hugepages-2Mi"] = hugepages
	}
	if requested > 0 {
		nc.Requested.Other = map[string]int64{"nvidia.com/gpu": requested}
	}
	return nc
}

// TestKeyedFieldValues: an object's keyed amounts read for any key, 0 for
// one it lacks, in the form selector values are normalized to.
func TestKeyedFieldValues(t *testing.T) {
	nc := gpuNode("a", 8, 1<<30, 6)
	o := nodecapacity.ToObject(&nc)
	f := nodecapacity.Kind.FieldValues(&o)
	for path, want := range map[string]string{
		gpuFree: "2",
		"status.allocatable.other.nvidia.com/gpu": "8",
		"status.requested.other.nvidia.com/gpu":   "6",
		"status.allocatable.other.hugepages-2Mi":  "1073741824",
		"status.available.other.example.com/fpga": "0",
		"status.schedulable":                      "true",
		"metadata.name":                           "c1.a",
	} {
		if got := f.Get(path); got != want || !f.Has(path) {
			t.Errorf("%s = %q (has %v), want %q", path, got, f.Has(path), want)
		}
	}
	for _, path := range []string{"status.available.other.", "status.available", "spec.x"} {
		if f.Has(path) || f.Get(path) != "" {
			t.Errorf("%s: has %v, value %q; want none", path, f.Has(path), f.Get(path))
		}
	}
	for sel, want := range map[string]bool{
		gpuFree + "!=0": true, gpuFree + "=2": true, gpuFree + "=0": false,
		"status.allocatable.other.hugepages-2Mi=1073741824":          true,
		"status.available.other.example.com/fpga=0":                  true,
		"status.available.other.example.com/fpga!=0":                 false,
		"status.requested.other.nvidia.com/gpu=6,metadata.name=c1.a": true,
	} {
		if got := fields.ParseSelectorOrDie(sel).Matches(f); got != want {
			t.Errorf("%s matches: %v, want %v", sel, got, want)
		}
	}
}

// TestKeyedFieldWatch: a watch filters keyed amounts in memory as the list
// selects them in the registry — 1Gi and 1073741824 are one value to both —
// and a node whose last GPU is taken leaves a watch of the nodes with one
// free.
func TestKeyedFieldWatch(t *testing.T) {
	mem := feedtest.New()
	var asked []store.ListOptions
	src := mem.NodeCapacities()
	list := src.List
	src.List = func(ctx context.Context, opts store.ListOptions) (*store.Page[store.NodeCapacity], error) {
		asked = append(asked, opts)
		return list(ctx, opts)
	}
	r := nodecapacity.NewREST(src, registry.WatchConfig{Follower: follow(t, mem)}, nil)

	for _, sel := range []string{"status.allocatable.other.hugepages-2Mi=1Gi", "status.allocatable.other.hugepages-2Mi=1073741824"} {
		if _, err := r.List(t.Context(), listOptions(t, sel)); err != nil {
			t.Fatal(err)
		}
		got := asked[len(asked)-1].Fields
		if len(got) != 1 || got[0].Key != "hugepages-2Mi" || got[0].Value != "1073741824" {
			t.Errorf("list %s: the store was asked for %+v, want hugepages-2Mi = 1073741824", sel, got)
		}
	}

	rv := mem.Put(gpuNode("before", 8, 0, 0))
	free, err := r.Watch(t.Context(), &metainternalversion.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10), FieldSelector: fields.ParseSelectorOrDie(gpuFree + "!=0")})
	if err != nil {
		t.Fatal(err)
	}
	defer free.Stop()
	huge, err := r.Watch(t.Context(), &metainternalversion.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10),
		FieldSelector: fields.ParseSelectorOrDie("status.allocatable.other.hugepages-2Mi=1Gi")})
	if err != nil {
		t.Fatal(err)
	}
	defer huge.Stop()

	mem.Put(gpuNode("cpu", 0, 0, 0))         // no GPU: 0 free, filtered out
	mem.Put(gpuNode("gpu", 8, 1<<30, 7))     // one free
	mem.Put(gpuNode("gpu", 8, 1<<30, 8))     // the last one taken
	mem.Put(gpuNode("huge", 0, 2<<30, 0))    // 2Gi of hugepages: not 1Gi
	mem.Put(gpuNode("before", 8, 0, 8))      // matched before the watch: leaves
	expect(t, free, watch.Added, "c1.gpu")   // 8 - 7
	expect(t, free, watch.Deleted, "c1.gpu") // 8 - 8: the last state that matched
	expect(t, free, watch.Deleted, "c1.before")
	expect(t, huge, watch.Added, "c1.gpu")
	expect(t, huge, watch.Modified, "c1.gpu")

	for _, sel := range []string{gpuFree + "!=lots", "status.available.other.=1", "status.available.other.a/b/c!=1"} {
		if _, err := r.Watch(t.Context(), listOptions(t, sel)); !apierrors.IsBadRequest(err) {
			t.Errorf("watch %s: %v, want 400", sel, err)
		}
	}
}

// expect reads w's next event and checks its type and object name.
func expect(t *testing.T, w watch.Interface, typ watch.EventType, name string) {
	t.Helper()
	select {
	case ev := <-w.ResultChan():
		obj := ev.Object
		if co, ok := obj.(runtime.CacheableObject); ok {
			obj = co.GetObject()
		}
		if nc, ok := obj.(*platform.NodeCapacity); ev.Type != typ || !ok || nc.Name != name {
			t.Errorf("watch event %s %T %v, want %s %s", ev.Type, obj, objectName(obj), typ, name)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no watch event, want %s %s", typ, name)
	}
}

func objectName(obj runtime.Object) string {
	if nc, ok := obj.(*platform.NodeCapacity); ok {
		return nc.Name
	}
	return ""
}

// TestKeyedFieldValidate: a keyed field's declaration mistakes are caught
// before serving.
func TestKeyedFieldValidate(t *testing.T) {
	get := func(*Widget, string) int64 { return 0 }
	bad := *widgetKind
	bad.Fields = append(slices.Clone(widgetKind.Fields),
		registry.Field[Widget]{Prefix: "status.gpus", Key: registry.ResourceName, Get: get, Amount: store.Amount{Column: "gpus"}},
		registry.Field[Widget]{Prefix: "status.free.", Key: registry.ResourceName, Amount: store.Amount{Column: "free"}},
		registry.Field[Widget]{Prefix: "status.used.", Key: registry.ResourceName, Get: get, Amount: store.Amount{Column: "used", Minus: "x; drop table y"}},
		registry.Field[Widget]{Prefix: "status.", Key: registry.ResourceName, Get: get, Amount: store.Amount{Column: "any"}},
		registry.Field[Widget]{Prefix: "status.used.", Key: registry.ResourceName, Get: get, Amount: store.Amount{Column: "used"}})
	err := bad.Validate()
	for _, want := range []string{"keyed field status.gpus: a Prefix ends in a dot", "keyed field status.free. needs a Get",
		`keyed field status.used.: Amount {Column:used Minus:x; drop table y} needs a Column`, "field status.ready is also a key of the keyed field status.",
		"keyed field status.free. is also a key of the keyed field status.", "keyed field status.used. declared twice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate: %v, want it to say %q", err, want)
		}
	}
	if err := nodecapacity.Kind.Validate(); err != nil {
		t.Error(err)
	}
}
