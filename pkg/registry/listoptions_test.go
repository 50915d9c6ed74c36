package registry

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCheckListResourceVersion: the list resourceVersion semantics answer
// as kube-apiserver does.
func TestCheckListResourceVersion(t *testing.T) {
	const served = 100
	tests := []struct {
		name  string
		opts  *metainternalversion.ListOptions
		check func(error) bool
	}{
		{"unset", &metainternalversion.ListOptions{}, func(err error) bool { return err == nil }},
		{"any", &metainternalversion.ListOptions{ResourceVersion: "0"}, func(err error) bool { return err == nil }},
		{"not older than", &metainternalversion.ListOptions{ResourceVersion: "99"}, func(err error) bool { return err == nil }},
		{"too large", &metainternalversion.ListOptions{ResourceVersion: "101"}, apierrors.IsTimeout},
		{"exact, served", &metainternalversion.ListOptions{ResourceVersion: "100", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, func(err error) bool { return err == nil }},
		{"exact, not retained", &metainternalversion.ListOptions{ResourceVersion: "99", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, apierrors.IsResourceExpired},
		{"invalid", &metainternalversion.ListOptions{ResourceVersion: "x"}, apierrors.IsBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckListResourceVersion(tc.opts, served)
			if !tc.check(err) {
				t.Errorf("CheckListResourceVersion(%q, %v) = %v", tc.opts.ResourceVersion, tc.opts.ResourceVersionMatch, err)
			}
			if tc.name == "exact, not retained" && apierrors.ReasonForError(err) != metav1.StatusReasonExpired {
				t.Errorf("reason %q, want Expired (410)", apierrors.ReasonForError(err))
			}
		})
	}
}
