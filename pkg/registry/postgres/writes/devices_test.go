package writes_test

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestDevices: DRA device counts per node, per namespace and per member
// follow slices, claims, pool generations, deletions and a member that
// stops serving resource.k8s.io, in the Apply that changes them.
func TestDevices(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	shared := store.ResourceSlice{Name: "nics", Driver: "net.example.com", Pool: "fabric", Devices: []string{"nic-0", "nic-1"}}
	first := store.Batch{ClusterID: "c",
		Namespaces: []store.Namespace{namespace("a"), namespace("b")},
		Nodes:      []store.Node{node("n1", 4000, 8<<30), node("n2", 4000, 8<<30)},
	}
	mustApply(t, s, ctx, first)
	if c := mustCapacity(t, s, ctx, "c"); c.Devices != nil {
		t.Errorf("devices before discovery looked at DRA: %+v, want none", c.Devices)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Replace: []store.Resource{store.ResourceResourceSlices},
		Slices: []store.ResourceSlice{slice("n1-gpus", "n1", 1, 8), slice("n2-gpus", "n2", 1, 4), shared}})
	pending := store.ResourceClaim{Namespace: "a", Name: "pending", UID: "uid-pending", Classes: map[string]int64{gpuClass: 0}}
	claims := store.Batch{ClusterID: "c", Replace: []store.Resource{store.ResourceResourceClaims}, Claims: []store.ResourceClaim{
		claim("a", "two", "n1", "gpu-1", "gpu-0"), claim("b", "one", "n2", "gpu-0"), pending}}
	mustApply(t, s, ctx, claims)

	checkDevices(t, s, b, "slices and claims", map[string]map[string]store.DeviceCount{
		"n1": {gpuDriver: {Total: 8, Allocated: 2}}, "n2": {gpuDriver: {Total: 4, Allocated: 1}}},
		map[string]map[string]store.ClaimCount{"a": {gpuClass: {Claims: 2, Devices: 2}}, "b": {gpuClass: {Claims: 1, Devices: 1}}},
		&store.MemberDevices{API: store.APIServed,
			Drivers: map[string]store.DeviceCount{gpuDriver: {Total: 12, Allocated: 3}, "net.example.com": {Total: 2}},
			Nodes:   map[string]int64{gpuDriver: 2}})

	rv := registryRV(t, s, ctx)
	mustApply(t, s, ctx, claims)
	if after := registryRV(t, s, ctx); after != rv {
		t.Errorf("re-applying the same claims moved the registry from %d to %d", rv, after)
	}

	// A driver republishing n1's pool: its newest generation alone counts.
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Slices: []store.ResourceSlice{slice("n1-gpus-v2", "n1", 2, 4)}})
	checkDevices(t, s, b, "a newer generation of n1's pool", map[string]map[string]store.DeviceCount{
		"n1": {gpuDriver: {Total: 4, Allocated: 2}}, "n2": {gpuDriver: {Total: 4, Allocated: 1}}},
		nil, &store.MemberDevices{API: store.APIServed,
			Drivers: map[string]store.DeviceCount{gpuDriver: {Total: 8, Allocated: 3}, "net.example.com": {Total: 2}},
			Nodes:   map[string]int64{gpuDriver: 2}})

	// A claim deallocated, then deleted.
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Claims: []store.ResourceClaim{claim("a", "two", "n1")}})
	checkDevices(t, s, b, "a claim deallocated", map[string]map[string]store.DeviceCount{
		"n1": {gpuDriver: {Total: 4}}, "n2": {gpuDriver: {Total: 4, Allocated: 1}}},
		map[string]map[string]store.ClaimCount{"a": {gpuClass: {Claims: 2}}, "b": {gpuClass: {Claims: 1, Devices: 1}}}, nil)
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Deleted: store.Keys{
		store.ResourceResourceClaims: {{Namespace: "b", Name: "one"}},
		store.ResourceResourceSlices: {{Name: "n1-gpus-v2"}}}})
	checkDevices(t, s, b, "a claim and the newer slice deleted", map[string]map[string]store.DeviceCount{
		"n1": {gpuDriver: {Total: 8}}, "n2": {gpuDriver: {Total: 4}}},
		map[string]map[string]store.ClaimCount{"a": {gpuClass: {Claims: 2}}, "b": nil},
		&store.MemberDevices{API: store.APIServed,
			Drivers: map[string]store.DeviceCount{gpuDriver: {Total: 12}, "net.example.com": {Total: 2}},
			Nodes:   map[string]int64{gpuDriver: 2}})

	// The member stops serving resource.k8s.io: nothing is left to count,
	// and the member says why.
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Unserved: map[store.Resource]store.APIState{
		store.ResourceResourceSlices: store.APIAbsent, store.ResourceResourceClaims: store.APIAbsent}})
	checkDevices(t, s, b, "the DRA API absent", map[string]map[string]store.DeviceCount{"n1": nil, "n2": nil},
		map[string]map[string]store.ClaimCount{"a": nil, "b": nil}, &store.MemberDevices{API: store.APIAbsent})
	conn, err := pgx.Connect(ctx, b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var rows int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM cluster_resource_slice) + (SELECT count(*) FROM cluster_resource_claim)
		+ (SELECT count(*) FROM cluster_claim_device)`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("DRA rows left after the API went absent: %d, %v", rows, err)
	}

	// Served again, with slices only readable: Forbidden wins over Served.
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Replace: []store.Resource{store.ResourceResourceSlices},
		Slices: []store.ResourceSlice{slice("n2-gpus", "n2", 1, 4)}})
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Unserved: map[store.Resource]store.APIState{store.ResourceResourceClaims: store.APIForbidden}})
	checkDevices(t, s, b, "claims forbidden", map[string]map[string]store.DeviceCount{"n2": {gpuDriver: {Total: 4}}}, nil,
		&store.MemberDevices{API: store.APIForbidden, Drivers: map[string]store.DeviceCount{gpuDriver: {Total: 4}}, Nodes: map[string]int64{gpuDriver: 1}})

	// A removed member's DRA rows go with it.
	removeMember(t, s, ctx, "c")
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM cluster_resource_slice WHERE cluster_id = 'c'`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("slices left after the member's removal: %d, %v", rows, err)
	}
}

// checkDevices compares the device counts of nodes, the claims of
// namespaces and the member's devices (nil maps and a nil member: not
// checked) with the registry's.
func checkDevices(t *testing.T, s *postgres.Store, b testBundle, when string,
	nodes map[string]map[string]store.DeviceCount, namespaces map[string]map[string]store.ClaimCount, member *store.MemberDevices) {
	t.Helper()
	for name, want := range nodes {
		if got := getNode(t, s, b.Ctx, "c", name).Devices; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: node %s devices %+v, want %+v", when, name, got, want)
		}
	}
	for name, want := range namespaces {
		if got := getNamespace(t, s, b.Ctx, "c", name).DeviceClaims; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: namespace %s claims %+v, want %+v", when, name, got, want)
		}
	}
	if member != nil {
		if got := mustCapacity(t, s, b.Ctx, "c").Devices; !reflect.DeepEqual(got, member) {
			t.Errorf("%s: member devices %+v, want %+v", when, got, member)
		}
	}
}

// TestMigrateToDevices: a registry at the schema before migration 016
// keeps its rows through it, with no devices until discovery lists the DRA
// resources, and counts them from then on.
func TestMigrateToDevices(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "c",
		Nodes: []store.Node{node("n1", 4000, 8<<30)}, Namespaces: []store.Namespace{namespace("a")},
		Pods: []store.Pod{pod("a", "p1", "n1", 500, 1<<30)}})
	if err := s.MigrateDownTo(ctx, 15); err != nil {
		t.Fatalf("MigrateDownTo(15): %v", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if n := getNode(t, s, ctx, "c", "n1"); n.Requested.CPUMillis != 500 || n.Requested.Pods != 1 || n.Devices != nil {
		t.Errorf("n1 after migration 016: %+v; want its requests kept and no devices", n)
	}
	if c := mustCapacity(t, s, ctx, "c"); c.Nodes != 1 || c.Devices != nil {
		t.Errorf("ClusterCapacity after migration 016: %+v; want 1 node and no devices yet", c)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Replace: []store.Resource{store.ResourceResourceSlices},
		Slices: []store.ResourceSlice{slice("n1-gpus", "n1", 1, 2)}})
	checkDevices(t, s, b, "slices after migration 016", map[string]map[string]store.DeviceCount{"n1": {gpuDriver: {Total: 2}}}, nil,
		&store.MemberDevices{API: store.APIServed, Drivers: map[string]store.DeviceCount{gpuDriver: {Total: 2}}, Nodes: map[string]int64{gpuDriver: 1}})
}
