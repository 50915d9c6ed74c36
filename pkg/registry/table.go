package registry

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// TableConvertor prints objects of one kind as kubectl table rows.
type TableConvertor struct {
	Columns []metav1.TableColumnDefinition
	// Cells returns one row's cells, in column order.
	Cells func(obj runtime.Object) ([]any, error)
}

// ConvertToTable implements rest.TableConvertor for a single object or a list.
func (c TableConvertor) ConvertToTable(_ context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || !opts.NoHeaders {
		table.ColumnDefinitions = c.Columns
	}
	addRow := func(o runtime.Object) error {
		cells, err := c.Cells(o)
		if err != nil {
			return err
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: o}})
		return nil
	}
	if meta.IsListType(obj) {
		if err := meta.EachListItem(obj, addRow); err != nil {
			return nil, err
		}
		if l, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = l.GetResourceVersion()
			table.Continue = l.GetContinue()
			table.RemainingItemCount = l.GetRemainingItemCount()
		}
		return table, nil
	}
	if err := addRow(obj); err != nil {
		return nil, err
	}
	if m, err := meta.Accessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}

// Age prints how long ago t was, as kubectl's AGE column does.
func Age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// Ratio prints an amount with its denominator and the percentage it makes,
// e.g. "3500m/3920m (89%)".
func Ratio(part, whole string, partValue, wholeValue float64) string {
	if wholeValue <= 0 {
		return fmt.Sprintf("%s/%s", part, whole)
	}
	return fmt.Sprintf("%s/%s (%d%%)", part, whole, int64(partValue*100/wholeValue))
}

// MilliCPU prints CPU in millicores, as kubectl top does ("3500m"), so the
// two sides of a ratio always share a unit.
func MilliCPU(m int64) string {
	return fmt.Sprintf("%dm", m)
}

// Bytes prints a byte count in binary units with at most one decimal, e.g.
// "15.6Gi" or "512Mi".
func Bytes(b int64) string {
	const unit = 1024
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	v := float64(b)
	i := 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	if v == float64(int64(v)) || i == 0 {
		return fmt.Sprintf("%d%s", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}

// Unknown is what a cell shows for a value the registry does not have.
const Unknown = "<unknown>"

// None is what a cell shows for a value that is empty, as kubectl prints it.
const None = "<none>"
