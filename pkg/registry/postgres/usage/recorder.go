package usage

import (
	"context"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
)

// Recorder records scrapes' samples in the usage history and reports due
// usage on the view rows, runs the history's maintenance, and makes stale
// usage unknown. Its writes to view rows are transactions of the write
// engine.
type Recorder struct {
	engine Writer
	// pool is the primary's pool for writes: samples, partitions and
	// turns need no commit ticket.
	pool *pgdb.Pool
}

// Writer runs a write transaction of the registry in its two sections
// (writes.Engine).
type Writer interface {
	Write(ctx context.Context, o writes.Op, sec writes.Sections) error
}

// NewRecorder returns a Recorder that writes view rows through engine and
// the rest on pool, the primary's pool for writes.
func NewRecorder(engine Writer, pool *pgdb.Pool) *Recorder {
	return &Recorder{engine: engine, pool: pool}
}

// The usage history's write operations (the metrics' label op).
const (
	opReportUsage          writes.Op = "report_usage"           // a node scrape's usage report
	opReportNamespaceUsage writes.Op = "report_namespace_usage" // a namespace scrape's history and report
	opExpireUsage          writes.Op = "expire_usage"
)
