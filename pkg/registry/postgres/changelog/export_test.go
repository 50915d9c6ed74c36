package changelog

// The history reads' statements, for plan tests.
var (
	HistoryWindowSQL = sqlHistoryWindow
	MemberWindowSQL  = sqlMemberWindow
)

// MemberChangesSQL is the statement that reads one member's entries of v.
func (l *Log) MemberChangesSQL(i int) string { return l.views[i].memberChangesSQL }
