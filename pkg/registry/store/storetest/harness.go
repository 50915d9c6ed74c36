// Package storetest holds conformance suites for the store contract: one
// suite run against every implementation (PostgreSQL, the in-memory feed
// of package feedtest), so unit tests on the fake prove something about
// the real thing.
package storetest

import (
	"fmt"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Harness drives one implementation of store.ChangeFeed. Each write is one
// commit; it may carry changes of other objects too (PostgreSQL sums a node
// into its member's ClusterCapacity in the same commit), which the suite
// allows for.
type Harness interface {
	// Feed is the feed under test: new, with no history compacted.
	Feed() store.ChangeFeed
	// Put creates the object of kind in cluster, or modifies it when it
	// exists. A ClusterCapacity's name is its cluster.
	Put(t *testing.T, kind store.Kind, cluster, name string)
	// Delete deletes an existing NodeCapacity or ClusterNamespace.
	Delete(t *testing.T, kind store.Kind, cluster, name string)
}

// object is what the suite reads of a change's object and previous state.
type object struct {
	name     string
	rv       int64
	hasPrev  bool
	prevName string
	prevRV   int64
}

// objectOf is the one place the suite reads a change's object, so a change
// of store.Change's shape touches only it.
func objectOf(c store.Change) object {
	var o object
	o.name, o.rv = nameAndVersion(c.Object)
	if c.Prev != nil {
		o.hasPrev = true
		o.prevName, o.prevRV = nameAndVersion(c.Prev)
	}
	return o
}

// nameAndVersion reads a record's object name (within its member) and
// resourceVersion.
func nameAndVersion(r any) (string, int64) {
	switch r := r.(type) {
	case *store.NodeCapacity:
		return r.Node.Name, r.ResourceVersion
	case *store.ClusterNamespace:
		return r.Namespace.Name, r.ResourceVersion
	case *store.ClusterCapacity:
		return r.ClusterID, r.ResourceVersion
	}
	return "", 0
}

// key names a change's object: kind/cluster/name.
func key(c store.Change) string {
	return fmt.Sprintf("%s/%s/%s", c.Kind, c.ClusterID, objectOf(c).name)
}

// describe is a change in one line, for comparisons and messages.
func describe(c store.Change) string {
	return fmt.Sprintf("%d %s %s", c.ResourceVersion, c.Type, key(c))
}

func describeAll(changes []store.Change) []string {
	out := make([]string, len(changes))
	for i, c := range changes {
		out[i] = describe(c)
	}
	return out
}

// read calls Changes and fails the test on an error.
func read(t *testing.T, feed store.ChangeFeed, filter store.ChangeFilter, after int64, limit int) ([]store.Change, int64) {
	t.Helper()
	changes, readAt, err := feed.Changes(t.Context(), filter, after, limit)
	if err != nil {
		t.Fatalf("Changes(%+v, after %d, limit %d): %v", filter, after, limit, err)
	}
	return changes, readAt
}

// everything reads every change after `after` in one call.
func everything(t *testing.T, feed store.ChangeFeed, filter store.ChangeFilter, after int64) ([]store.Change, int64) {
	t.Helper()
	return read(t, feed, filter, after, 1<<20)
}

// present is the feed's resourceVersion now.
func present(t *testing.T, feed store.ChangeFeed) int64 {
	t.Helper()
	_, readAt := read(t, feed, store.ChangeFilter{}, 0, 0)
	return readAt
}

// matching is the changes filter matches, in their order.
func matching(changes []store.Change, filter store.ChangeFilter) []store.Change {
	var out []store.Change
	for _, c := range changes {
		if filter.Matches(&c) {
			out = append(out, c)
		}
	}
	return out
}

// within is the changes with after < ResourceVersion <= upTo.
func within(changes []store.Change, after, upTo int64) []store.Change {
	var out []store.Change
	for _, c := range changes {
		if c.ResourceVersion > after && c.ResourceVersion <= upTo {
			out = append(out, c)
		}
	}
	return out
}
