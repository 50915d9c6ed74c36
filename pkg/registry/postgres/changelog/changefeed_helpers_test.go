package changelog_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// changeObject and changePrev return the change's object and previous state
// as any (a *store.NodeCapacity, *store.ClusterNamespace or
// *store.ClusterCapacity, nil when unset).
func changeObject(c store.Change) any {
	switch c.Kind {
	case store.KindNodeCapacity:
		return registrytest.AsNode(c.Object)
	case store.KindClusterCapacity:
		return registrytest.AsCapacity(c.Object)
	}
	return registrytest.AsNamespace(c.Object)
}

func changePrev(c store.Change) any {
	switch {
	case c.Kind == store.KindNodeCapacity && registrytest.AsNode(c.Prev) != nil:
		return registrytest.AsNode(c.Prev)
	case c.Kind == store.KindClusterNamespace && registrytest.AsNamespace(c.Prev) != nil:
		return registrytest.AsNamespace(c.Prev)
	case c.Kind == store.KindClusterCapacity && registrytest.AsCapacity(c.Prev) != nil:
		return registrytest.AsCapacity(c.Prev)
	}
	return nil
}

func objectRV(obj any) int64 {
	switch o := obj.(type) {
	case *store.NodeCapacity:
		return o.ResourceVersion
	case *store.ClusterNamespace:
		return o.ResourceVersion
	case *store.ClusterCapacity:
		return o.ResourceVersion
	}
	panic(fmt.Sprintf("unexpected %T", obj))
}

// withRV returns a copy of obj at resourceVersion rv.
func withRV(obj any, rv int64) any {
	switch o := obj.(type) {
	case *store.NodeCapacity:
		c := *o
		c.ResourceVersion = rv
		return &c
	case *store.ClusterNamespace:
		c := *o
		c.ResourceVersion = rv
		return &c
	case *store.ClusterCapacity:
		c := *o
		c.ResourceVersion = rv
		return &c
	}
	panic(fmt.Sprintf("unexpected %T", obj))
}

// viewState lists every view object by changeKey.
func viewState(t *testing.T, s *postgres.Store, ctx context.Context) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, n := range registrytest.ListNodes(t, s, ctx, store.ListOptions{}).Items {
		out["node/"+n.ClusterID+"/"+n.Node.Name] = &n
	}
	nss, err := s.ClusterNamespaces().List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nss.Items {
		out["ns/"+n.ClusterID+"/"+n.Namespace.Name] = &n
	}
	ccs, err := s.ClusterCapacities().List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ccs.Items {
		out["cc/"+c.ClusterID+"/"+c.ClusterID] = &c
	}
	return out
}

// getView gets one object by changeKey, nil when it does not exist.
func getView(t *testing.T, s *postgres.Store, ctx context.Context, kind store.Kind, cluster, name string) any {
	t.Helper()
	var (
		obj any
		err error
	)
	switch kind {
	case store.KindNodeCapacity:
		obj, err = s.GetNodeCapacity(ctx, cluster, name)
	case store.KindClusterCapacity:
		obj, err = s.GetClusterCapacity(ctx, cluster)
	default:
		obj, err = s.GetClusterNamespace(ctx, name, cluster)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", kind, cluster, name, err)
	}
	return obj
}

// replay applies changes to state (by changeKey), checking that each one is
// consistent with it: ADDED for an absent object without prev, MODIFIED and
// DELETED for a present one with prev equal to its current state, and the
// object at the change's version.
func replay(t *testing.T, state map[string]any, changes []store.Change) {
	t.Helper()
	for _, c := range changes {
		key, obj, prev := registrytest.ChangeKey(c), changeObject(c), changePrev(c)
		cur, present := state[key]
		if objectRV(obj) != c.ResourceVersion {
			t.Errorf("change %d %s %s: object at RV %d", c.ResourceVersion, c.Type, key, objectRV(obj))
		}
		switch c.Type {
		case store.ChangeAdded:
			if present || prev != nil {
				t.Errorf("change %d ADDED %s: present before %v, prev %+v", c.ResourceVersion, key, present, prev)
			}
		case store.ChangeModified, store.ChangeDeleted:
			if !present || !reflect.DeepEqual(prev, cur) {
				t.Errorf("change %d %s %s: prev\n%+v\nwant the state before\n%+v", c.ResourceVersion, c.Type, key, prev, cur)
			}
			if c.Type == store.ChangeDeleted && !reflect.DeepEqual(obj, withRV(prev, c.ResourceVersion)) {
				t.Errorf("change %d DELETED %s: tombstone %+v is not the last state %+v", c.ResourceVersion, key, obj, prev)
			}
		default:
			t.Errorf("change %d: type %q", c.ResourceVersion, c.Type)
		}
		if c.Type == store.ChangeDeleted {
			delete(state, key)
		} else {
			state[key] = obj
		}
	}
}
