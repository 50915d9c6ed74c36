package registry

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Request text is refused at the boundary when PostgreSQL could not store or
// compare it: text holds no NUL and must be valid UTF-8.
var (
	errNUL         = errors.New("contains a NUL character (\\x00), which no name, label or field may hold; remove it")
	errInvalidUTF8 = errors.New("is not valid UTF-8; send the text UTF-8 encoded")
)

// CheckText says why s cannot be a name, label or field value of a request,
// or nil when it can.
func CheckText(s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return errNUL
	}
	if !utf8.ValidString(s) {
		return errInvalidUTF8
	}
	return nil
}

// ValidateText is CheckText for object validation: one field.Invalid at
// path when s cannot be stored or compared.
func ValidateText(path *field.Path, s string) field.ErrorList {
	if err := CheckText(s); err != nil {
		return field.ErrorList{field.Invalid(path, s, err.Error())}
	}
	return nil
}

// CheckRequestText is CheckText as a 400 naming what carried the text
// (e.g. "name", "field selector metadata.name").
func CheckRequestText(what, s string) error {
	if err := CheckText(s); err != nil {
		return apierrors.NewBadRequest(what + " " + err.Error())
	}
	return nil
}

// ValidateMembers says what is wrong with a report's list of members
// (spec.clusters): an empty id, or one named twice.
func ValidateMembers(path *field.Path, clusters []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, c := range clusters {
		switch {
		case c == "":
			errs = append(errs, field.Required(path.Index(i), "a member cluster's id"))
		case seen[c]:
			errs = append(errs, field.Duplicate(path.Index(i), c))
		}
		seen[c] = true
	}
	return errs
}

// ValidateHistoryWindow says what is wrong with a window of the usage
// history: it must be positive and at most retention, the history the
// server keeps (--metrics-retention).
func ValidateHistoryWindow(path *field.Path, w, retention time.Duration) field.ErrorList {
	switch {
	case w <= 0:
		return field.ErrorList{field.Invalid(path, w.String(), "must be positive, e.g. 1h or 24h")}
	case w > retention:
		return field.ErrorList{field.Invalid(path, w.String(),
			fmt.Sprintf("longer than the usage history the server keeps (%s, --metrics-retention): ask for %s or less", retention, retention))}
	}
	return nil
}
