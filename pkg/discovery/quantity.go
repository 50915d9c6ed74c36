package discovery

import (
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// issue is a value of a member object that could not be mirrored as it is;
// the object is still recorded (with the value zeroed), and the worker logs
// and counts every issue.
type issue struct {
	Field  string
	Value  string
	Reason string
}

func (i issue) String() string { return fmt.Sprintf("%s=%q: %s", i.Field, i.Value, i.Reason) }

var (
	maxMilli = resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	maxValue = resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
)

// quantities reads amounts out of resource lists and collects the issues of
// those it cannot represent (negative, or too large for an int64).
type quantities struct {
	issues []issue
}

// text returns free text (a condition's message) as PostgreSQL can store
// it: it refuses NUL characters in text and jsonb, so each becomes U+FFFD,
// recorded as an issue.
func (q *quantities) text(field, s string) string {
	if !strings.ContainsRune(s, 0) {
		return s
	}
	q.issues = append(q.issues, issue{Field: field, Value: s, Reason: "NUL characters, which the registry cannot store, replaced by U+FFFD"})
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// milli returns list[name] in thousandths (CPU millicores); 0 when absent or unusable.
func (q *quantities) milli(field string, list corev1.ResourceList, name corev1.ResourceName) int64 {
	v, ok := list[name]
	if !ok {
		return 0
	}
	if v.Sign() < 0 || v.Cmp(*maxMilli) > 0 {
		q.issues = append(q.issues, issue{Field: field + "." + string(name), Value: v.String(), Reason: "negative or beyond int64 millis"})
		return 0
	}
	return v.MilliValue()
}

// value returns list[name] as a whole number (bytes, counts), rounded up; 0 when absent or unusable.
func (q *quantities) value(field string, list corev1.ResourceList, name corev1.ResourceName) int64 {
	v, ok := list[name]
	if !ok {
		return 0
	}
	if v.Sign() < 0 || v.Cmp(*maxValue) > 0 {
		q.issues = append(q.issues, issue{Field: field + "." + string(name), Value: v.String(), Reason: "negative or beyond int64"})
		return 0
	}
	return v.Value()
}

// others returns every resource of list besides cpu, memory and those in
// skip, as whole numbers of their unit (rounded up), nil when there is
// none; an unusable amount is an issue and left out.
func (q *quantities) others(field string, list corev1.ResourceList, skip ...corev1.ResourceName) map[string]int64 {
	var out map[string]int64
	for name := range list {
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory || slices.Contains(skip, name) {
			continue
		}
		before := len(q.issues)
		v := q.value(field, list, name)
		if len(q.issues) > before {
			continue
		}
		if out == nil {
			out = make(map[string]int64, len(list))
		}
		out[string(name)] = v
	}
	return out
}
