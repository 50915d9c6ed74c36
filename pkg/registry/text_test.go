package registry

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"empty", "", nil},
		{"ascii", "node-1.example", nil},
		{"multibyte", "naïve-日本", nil},
		{"nul", "a\x00b", errNUL},
		{"only nul", "\x00", errNUL},
		{"invalid utf-8", "a\xffb", errInvalidUTF8},
		{"truncated rune", "\xe6\x97", errInvalidUTF8},
		{"surrogate half", "\xed\xa0\x80", errInvalidUTF8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckText(tc.in); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("CheckText(%q) = %v, want %v", tc.in, got, tc.want)
			}
			errs := ValidateText(field.NewPath("spec", "cluster"), tc.in)
			if (len(errs) > 0) != (tc.want != nil) {
				t.Errorf("ValidateText(%q) = %v, want an error: %v", tc.in, errs, tc.want != nil)
			}
			err := CheckRequestText("name", tc.in)
			if (err != nil) != (tc.want != nil) || (err != nil && !apierrors.IsBadRequest(err)) {
				t.Errorf("CheckRequestText(%q) = %v, want a 400: %v", tc.in, err, tc.want != nil)
			}
		})
	}
}
