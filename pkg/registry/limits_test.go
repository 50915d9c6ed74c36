package registry

import (
	"fmt"
	"math"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

var limitsTestFields = Fields{kind: "Widget", byPath: map[string]store.FieldColumns{
	"metadata.name":      {Path: "metadata.name", Columns: []string{"name"}},
	"metadata.namespace": {Path: "metadata.namespace", Columns: []string{"namespace"}},
}}

func values(n int) string {
	v := make([]string, n)
	for i := range v {
		v[i] = fmt.Sprintf("v%d", i)
	}
	return strings.Join(v, ",")
}

func requirements(n int) string {
	r := make([]string, n)
	for i := range r {
		r[i] = fmt.Sprintf("k%d=v", i)
	}
	return strings.Join(r, ",")
}

// TestListOptionLimits: selectors beyond the limits, text the registry
// cannot compare and a negative limit are 400s that name what to change; a
// huge limit is served as the page size.
func TestListOptionLimits(t *testing.T) {
	limits := Limits{SelectorRequirements: 10, SelectorValues: 20, SelectorBytes: 1000, PageSize: 500}
	for _, tc := range []struct {
		name      string
		labels    string
		fields    fields.Selector
		namespace string
		limit     int64
		wantErr   string // a 400 containing it; "" for none
		wantLimit int64
	}{
		{name: "within every limit", labels: "a in (" + values(20) + ")," + requirements(9), limit: 100, wantLimit: 100},
		{name: "no limit stays none", wantLimit: 0},
		{name: "huge limit is the page size", limit: math.MaxInt64, wantLimit: 500},
		{name: "negative limit", limit: -1, wantErr: "limit must be zero (no limit) or positive"},
		{name: "too many values", labels: "a notin (" + values(21) + ")", wantErr: "21 values, more than the 20 this server accepts (--max-selector-values)"},
		{name: "too many label requirements", labels: requirements(11), wantErr: "11 requirements, more than the 10 this server accepts (--max-selector-requirements)"},
		{name: "too many field requirements", fields: fields.ParseSelectorOrDie(requirements(11)), wantErr: "field selector has 11 requirements"},
		{name: "too many bytes", labels: "a in (" + values(20) + ")", fields: fields.OneTermEqualSelector("metadata.name", strings.Repeat("x", 1000)), wantErr: "more than the 1000 this server accepts (--max-selector-bytes)"},
		{name: "NUL in a field selector", fields: fields.OneTermEqualSelector("metadata.name", "a\x00b"), wantErr: "field selector metadata.name: the value contains a NUL character"},
		{name: "invalid UTF-8 in a field selector", fields: fields.OneTermNotEqualSelector("metadata.name", "a\xffb"), wantErr: "is not valid UTF-8"},
		{name: "NUL in the namespace", namespace: "a\x00", wantErr: "the namespace contains a NUL character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := &metainternalversion.ListOptions{Limit: tc.limit, FieldSelector: tc.fields}
			if tc.labels != "" {
				sel, err := labels.Parse(tc.labels)
				if err != nil {
					t.Fatal(err)
				}
				opts.LabelSelector = sel
			}
			ctx := t.Context()
			if tc.namespace != "" {
				ctx = genericapirequest.WithNamespace(ctx, tc.namespace)
			}
			so, _, err := StoreListOptions(ctx, opts, limitsTestFields, limits)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if so.Limit != tc.wantLimit {
					t.Errorf("store limit %d, want %d", so.Limit, tc.wantLimit)
				}
				return
			}
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want a 400 containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestDefaultLimits: the zero Limits are the defaults.
func TestDefaultLimits(t *testing.T) {
	if got, want := (Limits{}).withDefaults(), DefaultLimits(); got != want {
		t.Errorf("zero limits = %+v, want the defaults %+v", got, want)
	}
	sel, _ := labels.Parse("a in (" + values(1000) + ")")
	if err := (Limits{}).CheckListOptions(&metainternalversion.ListOptions{LabelSelector: sel}); err != nil {
		t.Errorf("1000 values within the defaults: %v", err)
	}
	sel, _ = labels.Parse("a in (" + values(1001) + ")")
	if err := (Limits{}).CheckListOptions(&metainternalversion.ListOptions{LabelSelector: sel}); err == nil {
		t.Error("1001 values: want a 400")
	}
}
