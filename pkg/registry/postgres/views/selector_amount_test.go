package views

import (
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/selection"

	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestAmountFieldSQL: a keyed amount compares as numeric, a key a jsonb
// object lacks as 0, with the key and the whole number bound.
func TestAmountFieldSQL(t *testing.T) {
	t.Parallel()
	value := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	for _, tc := range []struct {
		req  store.FieldRequirement
		want string
	}{
		{store.FieldRequirement{Field: nodecapacity.Kind.MustField("status.available.other."), Op: selection.NotEquals, Key: "nvidia.com/gpu", Value: "0"},
			`((coalesce((allocatable_other->>$1)::numeric, 0) - coalesce((requested_other->>$1)::numeric, 0)) <> $2::bigint)`},
		{store.FieldRequirement{Field: nodecapacity.Kind.MustField("status.allocatable.other."), Op: selection.DoubleEquals, Key: "hugepages-2Mi", Value: "1073741824"},
			`((coalesce((allocatable_other->>$1)::numeric, 0)) = $2::bigint)`},
	} {
		var args pgdb.Args
		got, err := fieldSQL(&args, tc.req)
		if err != nil || got != tc.want || !equalArgs(args, []any{tc.req.Key, value(tc.req.Value)}) {
			t.Errorf("%s%s %s %s:\n got %s %#v, %v\nwant %s", tc.req.Field.Path, tc.req.Key, tc.req.Op, tc.req.Value, got, []any(args), err, tc.want)
		}
	}
	var args pgdb.Args
	if _, err := fieldSQL(&args, store.FieldRequirement{Field: nodecapacity.Kind.MustField("status.available.other."), Op: selection.In, Key: "a", Value: "1"}); err == nil {
		t.Error("operator in: want an error")
	}
}
