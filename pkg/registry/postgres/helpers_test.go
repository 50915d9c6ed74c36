package postgres_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// removeMember removes a member at once, as the registry does once no
// configuration has listed it for the grace period.
func removeMember(t *testing.T, s *postgres.Store, ctx context.Context, id string) {
	t.Helper()
	res, err := s.ReconcileMembers(ctx, store.MembersView{Unconfigured: []string{id}})
	if err != nil || !slices.Equal(res.RemovedNow, []string{id}) {
		t.Fatalf("remove member %s: %+v, %v", id, res, err)
	}
}

// relist lists a removed member anew, as a configuration that names it
// again does, so it may be claimed.
func relist(t *testing.T, s *postgres.Store, ctx context.Context, id string) {
	t.Helper()
	if _, err := s.ReconcileMembers(ctx, store.MembersView{Configured: []string{id}, Listed: []string{id}}); err != nil {
		t.Fatalf("list member %s anew: %v", id, err)
	}
}

func nodeKeys(items []store.NodeCapacity) string {
	keys := make([]string, len(items))
	for i, n := range items {
		keys[i] = n.ClusterID + "." + n.Node.Name
	}
	return strings.Join(keys, ",")
}

func namespaceKeys(items []store.ClusterNamespace) string {
	keys := make([]string, len(items))
	for i, n := range items {
		keys[i] = n.Namespace.Name + "/" + n.ClusterID
	}
	return strings.Join(keys, ",")
}

// reportEvery reports every newer sample, as usage was before reporting.
var reportEvery = store.UsageReporting{Threshold: 0, Period: time.Nanosecond}

// poll waits until cond holds, failing the test after 10 s.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
