package registry

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits bound what one list, watch or query may ask of the registry: each
// is generous for a person or a controller and refuses a request built to
// load the database. The zero value of a field means its default.
type Limits struct {
	// SelectorRequirements is the most requirements one label or field
	// selector may have (--max-selector-requirements).
	SelectorRequirements int
	// SelectorValues is the most values one in or notin requirement may
	// list (--max-selector-values).
	SelectorValues int
	// SelectorBytes is the most bytes a request's label and field selectors
	// may have together (--max-selector-bytes).
	SelectorBytes int
	// PageSize is the most items one page of a list holds: a larger limit
	// is served as this one, with a continue token (--max-list-page-size).
	PageSize int64
	// QueryAffinityTerms, QueryTolerations, QueryResources and
	// QueryClusters bound a query kind's lists (a PlacementReport's node
	// affinity terms, tolerations, requests and devices, named members):
	// --max-query-affinity-terms, --max-query-tolerations,
	// --max-query-resources (requests and devices each) and
	// --max-query-clusters. A matchFields term's names count as one
	// selector's values (SelectorValues).
	QueryAffinityTerms int
	QueryTolerations   int
	QueryResources     int
	QueryClusters      int
}

// DefaultLimits are the flags' defaults.
func DefaultLimits() Limits {
	return Limits{SelectorRequirements: 100, SelectorValues: 1000, SelectorBytes: 64 << 10, PageSize: 10000,
		QueryAffinityTerms: 8, QueryTolerations: 100, QueryResources: 32, QueryClusters: 1000}
}

// withDefaults fills the zero fields with their defaults.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.SelectorRequirements <= 0 {
		l.SelectorRequirements = d.SelectorRequirements
	}
	if l.SelectorValues <= 0 {
		l.SelectorValues = d.SelectorValues
	}
	if l.SelectorBytes <= 0 {
		l.SelectorBytes = d.SelectorBytes
	}
	if l.PageSize <= 0 {
		l.PageSize = d.PageSize
	}
	for _, f := range []struct{ v, d *int }{{&l.QueryAffinityTerms, &d.QueryAffinityTerms}, {&l.QueryTolerations, &d.QueryTolerations},
		{&l.QueryResources, &d.QueryResources}, {&l.QueryClusters, &d.QueryClusters}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	return l
}

// TooMany refuses a query body's list longer than limit, naming the flag
// that sets it.
func TooMany(path *field.Path, n, limit int, flag string) *field.Error {
	e := field.TooMany(path, n, limit)
	e.Detail += " (this server's " + flag + "): ask about fewer"
	return e
}

// WithDefaults returns l with its zero fields set to their defaults.
func (l Limits) WithDefaults() Limits { return l.withDefaults() }

// pageSize is the page size a list asking limit gets: limit, at most
// PageSize; 0 (no limit) stays 0.
func (l Limits) pageSize(limit int64) int64 {
	return min(limit, l.withDefaults().PageSize)
}

// CheckListOptions refuses, with a 400 naming the limit and its flag, list
// options whose selectors exceed the limits or carry text the registry
// cannot compare (NUL, invalid UTF-8), and a negative limit.
func (l Limits) CheckListOptions(opts *metainternalversion.ListOptions) error {
	if opts == nil {
		return nil
	}
	if opts.Limit < 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("limit must be zero (no limit) or positive, got %d", opts.Limit))
	}
	l = l.withDefaults()
	var labelText, fieldText string
	if opts.LabelSelector != nil {
		labelText = opts.LabelSelector.String()
	}
	if opts.FieldSelector != nil {
		fieldText = opts.FieldSelector.String()
	}
	if n := len(labelText) + len(fieldText); n > l.SelectorBytes {
		return apierrors.NewBadRequest(fmt.Sprintf(
			"the label and field selectors are %d bytes, more than the %d this server accepts (--max-selector-bytes): select with fewer or shorter terms, or list more and filter on the client", n, l.SelectorBytes))
	}
	if opts.LabelSelector != nil {
		reqs, _ := opts.LabelSelector.Requirements()
		if err := l.CheckLabelRequirements(reqs); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
	}
	if opts.FieldSelector != nil {
		reqs := opts.FieldSelector.Requirements()
		if len(reqs) > l.SelectorRequirements {
			return apierrors.NewBadRequest(fmt.Sprintf(
				"the field selector has %d requirements, more than the %d this server accepts (--max-selector-requirements): select with fewer", len(reqs), l.SelectorRequirements))
		}
		for _, r := range reqs {
			if err := CheckRequestText("field selector "+r.Field+": the value", r.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckLabelRequirements says why a label selector's requirements exceed the
// limits or carry text the registry cannot compare, or nil. Label selectors
// of UsageReports are checked with it too.
func (l Limits) CheckLabelRequirements(reqs labels.Requirements) error {
	l = l.withDefaults()
	if len(reqs) > l.SelectorRequirements {
		return fmt.Errorf("the label selector has %d requirements, more than the %d this server accepts (--max-selector-requirements): select with fewer", len(reqs), l.SelectorRequirements)
	}
	for _, r := range reqs {
		values := r.Values()
		if (r.Operator() == selection.In || r.Operator() == selection.NotIn) && values.Len() > l.SelectorValues {
			return fmt.Errorf("the label selector requirement on %q lists %d values, more than the %d this server accepts (--max-selector-values): list fewer, or select on a label the objects share",
				r.Key(), values.Len(), l.SelectorValues)
		}
		if err := CheckText(r.Key()); err != nil {
			return fmt.Errorf("label selector key %q %w", r.Key(), err)
		}
		for v := range values {
			if err := CheckText(v); err != nil {
				return fmt.Errorf("label selector %s: a value %w", r.Key(), err)
			}
		}
	}
	return nil
}
