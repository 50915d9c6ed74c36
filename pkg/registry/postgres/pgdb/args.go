package pgdb

import "strconv"

// Args collects the bind parameters of SQL built at run time and hands out
// their placeholders.
type Args []any

// Add appends v and returns its placeholder ($n).
func (a *Args) Add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}
