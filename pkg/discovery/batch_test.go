package discovery

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestBatchSlots holds every member resource to its declaration: an object
// converted lands in its resource's slot of the batch, a deletion under its
// resource's deleted keys.
func TestBatchSlots(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "x"}
	tests := []struct {
		resource store.Resource
		obj      runtime.Object
		count    func(b store.Batch) int
	}{
		{store.ResourceNamespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, func(b store.Batch) int { return len(b.Namespaces) }},
		{store.ResourceNodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, func(b store.Batch) int { return len(b.Nodes) }},
		{store.ResourcePods, &corev1.Pod{ObjectMeta: meta}, func(b store.Batch) int { return len(b.Pods) }},
		{store.ResourceResourceQuotas, &corev1.ResourceQuota{ObjectMeta: meta}, func(b store.Batch) int { return len(b.Quotas) }},
		{store.ResourceResourceSlices, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, func(b store.Batch) int { return len(b.Slices) }},
		{store.ResourceResourceClaims, &resourcev1.ResourceClaim{ObjectMeta: meta}, func(b store.Batch) int { return len(b.Claims) }},
	}
	if len(tests) != len(memberResources) {
		t.Fatalf("%d cases for %d member resources", len(tests), len(memberResources))
	}
	for _, tt := range tests {
		t.Run(string(tt.resource), func(t *testing.T) {
			r := mustResource(t, tt.resource)
			rec, _, err := r.convert(tt.obj)
			if err != nil || rec == nil {
				t.Fatalf("convert = %v, %v; want a record", rec, err)
			}
			p := newPending(r, "7")
			p.add("ADDED", change{key: store.ObjectKey{Name: "x"}, rec: rec}, time.Now())
			p.add("DELETED", change{key: store.ObjectKey{Name: "gone"}}, time.Now())
			b := p.batch("c")
			if n := tt.count(b); n != 1 {
				t.Errorf("%d records in the resource's slot, want 1", n)
			}
			if got := b.Deleted[tt.resource]; len(got) != 1 || got[0].Name != "gone" || len(b.Deleted) != 1 {
				t.Errorf("deleted %v, want gone under %s only", b.Deleted, tt.resource)
			}
			if b.Cursors[tt.resource] != "7" {
				t.Errorf("cursors %v, want 7 for %s", b.Cursors, tt.resource)
			}
			if _, _, err := r.convert(&corev1.ConfigMap{}); err == nil {
				t.Error("converting an object of another type did not fail")
			}
		})
	}
}

// TestUnservedBatch: the batch saying a member does not serve an optional
// resource carries the state, no records, and an empty cursor (a restart
// lists instead of resuming a watch whose rows were deleted).
func TestUnservedBatch(t *testing.T) {
	for _, r := range memberResources {
		if got := r.optional; got != (r.name == store.ResourceResourceSlices || r.name == store.ResourceResourceClaims) {
			t.Errorf("%s: optional = %v; only the DRA resources are", r.name, got)
		}
	}
	r := mustResource(t, store.ResourceResourceClaims)
	p := newPending(r, "")
	p.unserved = store.APIForbidden
	if !p.dirty("123") || !p.dirty("") {
		t.Error("an unserved batch is not dirty")
	}
	b := p.batch("c")
	if len(b.Unserved) != 1 || b.Unserved[store.ResourceResourceClaims] != store.APIForbidden {
		t.Errorf("unserved %v, want resourceclaims Forbidden", b.Unserved)
	}
	if v, ok := b.Cursors[store.ResourceResourceClaims]; !ok || v != "" || len(b.Cursors) != 1 {
		t.Errorf("cursors %v, want resourceclaims cleared", b.Cursors)
	}
	if len(b.Claims)+len(b.Deleted)+len(b.Replace) != 0 {
		t.Errorf("an unserved batch carries changes: %+v", b)
	}
}
