// Package writes is the registry's write engine: every write to the
// registry is one transaction of Engine.Write in two sections, the member
// section under the member's lock, then, if a view row changes, the views
// section under a commit ticket, committed in ticket order. The walk of a
// discovery batch, in the order it runs (docs/write-path.md):
//
//   - Engine.Apply (apply.go) queues the batch; apply_group.go commits
//     small batches of different members together (group commit), a large
//     one or a relist alone.
//   - Alone, a batch's view rows beyond the last ViewRowsPerCommit commit first,
//     in parts (apply_parts.go); a relist's last batch of member rows commits in three
//     steps: rows, aggregates in parts, cursors (apply_relist.go).
//   - applier.sections (apply.go) is a batch's two sections: in the member
//     section the fence (Writer.Fence), the relist's deletions (replace),
//     the namespaces and nodes that change (dropUnchanged), the member rows
//     (apply_resources.go, apply_devices.go), the aggregates
//     (aggregates.go) and the cursors; in the views section the view rows,
//     the aggregates and the member's device counts.
//   - Engine.Write (write.go) takes the ticket, waits for the earlier ones,
//     publishes the registry's present and commits.
//
// Members' claims, identity, cursors and removal (cluster.go) and their
// mirroring state (member_state.go) are writes of the engine too. The
// usage history's writes (usage reports and expiry) run their own
// Sections through Engine.Write. The view rows' statements are the views'
// (package views); what a write leaves for watches is the change log's.
// The engine holds no pool of its own: it writes on the primary's writes
// pool it is given.
package writes

import (
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
)

// Engine writes to the registry on the primary. It is safe for concurrent
// use.
type Engine struct {
	// pool is the primary's pool for writes.
	pool *pgdb.Pool
	// applies are the Apply batches waiting for a group commit.
	applies applyQueue
}

// New returns an engine writing on pool, the primary's pool for writes.
func New(pool *pgdb.Pool) *Engine {
	e := &Engine{pool: pool}
	e.applies.init()
	return e
}
