package writes

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// DRA: a member's ResourceSlices and ResourceClaims are member rows; the
// device counts on its nodes, namespaces and ClusterCapacity are kept from
// them in the same Apply (docs/registry.md, "DRA devices").

var (
	sqlAbsentSlices          = statement("apply_absent_slices")
	sqlAbsentClaims          = statement("apply_absent_claims")
	sqlDeleteSlices          = statement("apply_delete_slices")
	sqlDeleteClaims          = statement("apply_delete_claims")
	sqlUpsertSlices          = statement("apply_upsert_slices")
	sqlUpsertClaims          = statement("apply_upsert_claims")
	sqlRecomputeMemberDevice = statement("devices_recompute_member")
)

// deviceTables are the member tables of the device resources
// (views.DeviceResources).
var deviceTables = []memberTable{
	{
		resource: store.ResourceResourceSlices,
		keys: func(b *store.Batch) []store.ObjectKey {
			return keysOf(b.Slices, func(s store.ResourceSlice) store.ObjectKey { return store.ObjectKey{Name: s.Name} })
		},
		absent: func(a *applier, present []store.ObjectKey) ([]store.ObjectKey, error) {
			return a.absentNames("cluster_resource_slice", sqlAbsentSlices, present)
		},
		delete: (*applier).deleteSlices,
		upsert: (*applier).upsertSlices,
	},
	{
		resource: store.ResourceResourceClaims,
		keys: func(b *store.Batch) []store.ObjectKey {
			return keysOf(b.Claims, func(c store.ResourceClaim) store.ObjectKey {
				return store.ObjectKey{Namespace: c.Namespace, Name: c.Name}
			})
		},
		absent: func(a *applier, present []store.ObjectKey) ([]store.ObjectKey, error) {
			return a.absentKeys("cluster_resource_claim", sqlAbsentClaims, present)
		},
		delete: (*applier).deleteClaims,
		upsert: (*applier).upsertClaims,
	},
}

// sliceRow is one row of apply_upsert_slices' jsonb parameter.
type sliceRow struct {
	Name           string   `json:"name"`
	NodeName       string   `json:"node_name"`
	Driver         string   `json:"driver"`
	Pool           string   `json:"pool"`
	PoolGeneration int64    `json:"pool_generation"`
	Devices        []string `json:"devices"`
}

func (a *applier) upsertSlices() error {
	slices := lastByKey(a.b.Slices, func(s store.ResourceSlice) string { return s.Name })
	if len(slices) == 0 {
		return nil
	}
	rows := make([]sliceRow, len(slices))
	for i, s := range slices {
		if err := CheckText("resource slice", append([]string{s.Name, s.NodeName, s.Driver, s.Pool}, s.Devices...)...); err != nil {
			return fmt.Errorf("upsert resource slices: %w", err)
		}
		rows[i] = sliceRow{Name: s.Name, NodeName: s.NodeName, Driver: s.Driver, Pool: s.Pool, PoolGeneration: s.PoolGeneration, Devices: s.Devices}
	}
	param, err := JSONRows(rows)
	if err != nil {
		return fmt.Errorf("upsert resource slices: %w", err)
	}
	result, err := a.tx.Query(a.ctx, sqlUpsertSlices, a.cluster, param)
	if err != nil {
		return fmt.Errorf("upsert resource slices: %w", err)
	}
	return a.collectNames(result, a.nodes)
}

func (a *applier) deleteSlices() error {
	deleted := keyNames(a.b.Deleted[store.ResourceResourceSlices])
	if len(deleted) == 0 {
		return nil
	}
	if err := CheckText("resource slice", deleted...); err != nil {
		return fmt.Errorf("delete resource slices: %w", err)
	}
	result, err := a.tx.Query(a.ctx, sqlDeleteSlices, a.cluster, deleted)
	if err != nil {
		return fmt.Errorf("delete resource slices: %w", err)
	}
	return a.collectNames(result, a.nodes)
}

// claimRow is one row of apply_upsert_claims' jsonb parameter.
type claimRow struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	UID       string            `json:"uid"`
	Classes   map[string]int64  `json:"classes,omitempty"`
	Allocated []store.DeviceRef `json:"allocated,omitempty"`
}

func (a *applier) upsertClaims() error {
	claims := lastByKey(a.b.Claims, func(c store.ResourceClaim) string { return c.Namespace + "/" + c.Name })
	if len(claims) == 0 {
		return nil
	}
	rows := make([]claimRow, len(claims))
	for i, c := range claims {
		texts := []string{c.Namespace, c.Name, c.UID}
		for class := range c.Classes {
			texts = append(texts, class)
		}
		for _, d := range c.Allocated {
			texts = append(texts, d.Driver, d.Pool, d.Device)
		}
		if err := CheckText("resource claim", texts...); err != nil {
			return fmt.Errorf("upsert resource claims: %w", err)
		}
		// One order, so an unchanged claim compares equal to its row.
		allocated := slices.Clone(c.Allocated)
		slices.SortFunc(allocated, compareDeviceRefs)
		rows[i] = claimRow{Namespace: c.Namespace, Name: c.Name, UID: c.UID, Classes: c.Classes, Allocated: slices.Compact(allocated)}
	}
	param, err := JSONRows(rows)
	if err != nil {
		return fmt.Errorf("upsert resource claims: %w", err)
	}
	result, err := a.tx.Query(a.ctx, sqlUpsertClaims, a.cluster, param)
	if err != nil {
		return fmt.Errorf("upsert resource claims: %w", err)
	}
	return a.collectNamespacesAndNodes(result)
}

func compareDeviceRefs(x, y store.DeviceRef) int {
	return cmp.Or(cmp.Compare(x.Driver, y.Driver), cmp.Compare(x.Pool, y.Pool), cmp.Compare(x.Device, y.Device))
}

func (a *applier) deleteClaims() error {
	deleted := a.b.Deleted[store.ResourceResourceClaims]
	if len(deleted) == 0 {
		return nil
	}
	rows, err := a.queryKeys(sqlDeleteClaims, deleted)
	if err != nil {
		return fmt.Errorf("delete resource claims: %w", err)
	}
	return a.collectNamespacesAndNodes(rows)
}

// touchesDevices reports whether the batch writes DRA rows or says the
// member serves or lacks the DRA API.
func touchesDevices(b *store.Batch) bool {
	if len(b.Slices)+len(b.Claims) > 0 {
		return true
	}
	for _, r := range views.DeviceResources {
		if _, unserved := b.Unserved[r]; unserved || len(b.Deleted[r]) > 0 || slices.Contains(b.Replace, r) {
			return true
		}
	}
	return false
}

// recomputeMemberDevices keeps the member's device counts and DRA API
// states on its ClusterCapacity, when the batch touched them.
func (a *applier) recomputeMemberDevices() error {
	if !touchesDevices(&a.b) {
		return nil
	}
	apis := map[store.Resource]store.APIState{}
	for _, r := range views.DeviceResources {
		if st, ok := a.b.Unserved[r]; ok {
			apis[r] = st
		} else if slices.Contains(a.b.Replace, r) {
			apis[r] = store.APIServed
		}
	}
	param, err := json.Marshal(apis)
	if err != nil {
		return fmt.Errorf("recompute member devices: %w", err)
	}
	return a.Stamp("recompute member devices", sqlRecomputeMemberDevice, a.cluster, param, a.startRV)
}
