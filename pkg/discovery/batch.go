package discovery

import (
	"cmp"
	"slices"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// change is one object's latest fate in a pending batch.
type change struct {
	key store.ObjectKey // Namespace empty for cluster-scoped resources
	rec any             // the resource's record (memberResource.convert); nil deletes
}

// pending accumulates the changes of one resource until they are committed.
// Only each object's latest state is kept, so a burst of events on few
// objects stays small, and no object appears twice in a batch (Apply's rule).
type pending struct {
	resource *memberResource
	changes  map[store.ObjectKey]change
	// events counts what was absorbed (events, or objects of a relist).
	events int
	// byType counts events per watch event type, for the applied metric.
	byType map[string]int
	// received holds each absorbed event's arrival, for the lag metric.
	received []time.Time
	// cursor is the member resourceVersion the batch reaches.
	cursor string
	// asOf is the member time up to which the batch, once committed with
	// its cursor, makes the mirror complete: the arrival of its newest
	// watch event or bookmark, or when its list began (zero: it does not
	// say, as a relist's chunk).
	asOf time.Time
	// replace marks a relist: rows absent from the batch (and from
	// present) are deleted.
	replace bool
	// present holds the keys a relist committed in earlier chunks.
	present []store.ObjectKey
	// chunk marks a relist's chunk: its last batch follows (Batch.Chunk).
	chunk bool
	// unserved, when set, makes the batch say the member does not serve
	// the (optional) resource, and why: it carries no changes, and clears
	// the cursor, so a restart lists instead of resuming a watch whose
	// rows the registry deleted.
	unserved store.APIState
}

func newPending(r *memberResource, cursor string) *pending {
	return &pending{resource: r, changes: map[store.ObjectKey]change{}, byType: map[string]int{}, cursor: cursor}
}

// add records an event (or listed object) received at t.
func (p *pending) add(eventType string, c change, t time.Time) {
	p.changes[c.key] = c
	p.count(eventType, t)
}

// count records an event that changes no row but moves the cursor (a bookmark).
func (p *pending) count(eventType string, t time.Time) {
	p.events++
	p.byType[eventType]++
	p.received = append(p.received, t)
}

// dirty reports whether the batch has anything to commit beyond committedCursor.
func (p *pending) dirty(committedCursor string) bool {
	return len(p.changes) > 0 || p.replace || p.unserved != "" || p.cursor != committedCursor
}

// takeChunk moves the changes absorbed so far into a batch of their own,
// without cursor or Replace: a relist commits in chunks and only its last
// batch carries Replace, the keys the chunks committed (present) and the
// cursor.
func (p *pending) takeChunk() *pending {
	chunk := newPending(p.resource, "")
	chunk.chunk = true
	chunk.changes, chunk.events, chunk.byType, chunk.received = p.changes, p.events, p.byType, p.received
	p.changes, p.events, p.byType, p.received = map[store.ObjectKey]change{}, 0, map[string]int{}, nil
	return chunk
}

// keys returns the keys of the pending changes, sorted.
func (p *pending) keys() []store.ObjectKey {
	keys := make([]store.ObjectKey, 0, len(p.changes))
	for k := range p.changes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b store.ObjectKey) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return keys
}

// batch builds the store batch for cluster.
func (p *pending) batch(cluster string) store.Batch {
	r := p.resource.name
	b := store.Batch{ClusterID: cluster, Chunk: p.chunk, Cursors: map[store.Resource]string{}}
	if p.cursor != "" {
		b.Cursors[r] = p.cursor
	}
	if p.replace {
		b.Replace = []store.Resource{r}
		b.Present = p.present
	}
	if p.unserved != "" {
		b.Unserved = map[store.Resource]store.APIState{r: p.unserved}
		b.Cursors[r] = ""
	}
	for _, c := range p.changes {
		if c.rec == nil {
			if b.Deleted == nil {
				b.Deleted = store.Keys{}
			}
			b.Deleted[r] = append(b.Deleted[r], c.key)
			continue
		}
		p.resource.put(&b, c.rec)
	}
	return b
}
