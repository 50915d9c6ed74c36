package usagereport

import (
	"fmt"
	"strings"
	"testing"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
)

// TestValidateRefusesWhatTheRegistryCannotAnswer: text PostgreSQL cannot
// compare and node selectors beyond the server's limits are refused before
// any lookup, each saying what to change.
func TestValidateRefusesWhatTheRegistryCannotAnswer(t *testing.T) {
	manyValues := make([]string, 11)
	for i := range manyValues {
		manyValues[i] = fmt.Sprintf("n%d", i)
	}
	a := (&REST{&answerer{retention: 24 * hour().Duration}}).WithLimits(registry.Limits{SelectorValues: 10}).answerer
	for _, tc := range []struct {
		name string
		spec platform.UsageReportSpec
		want string
	}{
		{"NUL in cluster", platform.UsageReportSpec{Cluster: "prod\x00", Window: hour()}, "spec.cluster: Invalid value"},
		{"invalid UTF-8 in namespace", platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-\xff", Window: hour()}, "not valid UTF-8"},
		{"NUL in node name", platform.UsageReportSpec{Cluster: "prod-1", NodeName: "n\x001", Window: hour()}, "spec.nodeName"},
		{"too many selector values", platform.UsageReportSpec{Cluster: "prod-1", NodeSelector: "pool in (" + strings.Join(manyValues, ",") + ")", Window: hour()},
			"11 values, more than the 10 this server accepts (--max-selector-values)"},
		{"within the limits", platform.UsageReportSpec{Cluster: "prod-1", NodeSelector: "pool in (" + strings.Join(manyValues[:10], ",") + ")", Window: hour()}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := a.validate(&tc.spec)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("validate: %v", errs)
				}
				return
			}
			if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), tc.want) {
				t.Errorf("validate: %v, want an error containing %q", got, tc.want)
			}
		})
	}
}
