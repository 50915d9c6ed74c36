package feed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// HistoryBatch is how many changes one history query reads.
const HistoryBatch = 1000

// historyReadTimeout bounds one history query.
const historyReadTimeout = time.Minute

// historyReader serves the history reads of watches resuming below the
// window. Requests with the same filter queue together, and one query,
// from the lowest position queued, answers every request it covers: a
// query from v that read the changes up to reach serves each request from
// a in [v, reach) with its changes after a. So resumes at many positions
// share a few queries instead of making one each, and at most
// concurrency queries run at once, whatever the number of filters, their
// turns shared fairly among the users who asked (fairTurns): a query's
// user is its oldest request's.
type historyReader struct {
	feed  store.ChangeFeed
	turns *fairTurns

	mu sync.Mutex
	// queues holds the requests waiting per filter; a filter is present
	// while a goroutine serves it.
	queues map[historyKey][]*historyRequest
}

// historyKey is what a history read is queued by: a watch's filter (its
// kind and member; history reads never filter by a list of kinds).
type historyKey struct {
	kind      store.Kind
	clusterID string
}

func keyOf(f store.ChangeFilter) historyKey { return historyKey{f.Kind, f.ClusterID} }

// filter is the change filter of the reads queued under k.
func (k historyKey) filter() store.ChangeFilter {
	return store.ChangeFilter{Kind: k.kind, ClusterID: k.clusterID}
}

type historyRequest struct {
	after int64
	user  string             // who asked (request.UserFrom), for fair turns
	done  chan historyResult // buffered: serve never waits for the requester
}

type historyResult struct {
	changes []store.Change
	reach   int64
	err     error
}

func newHistoryReader(feed store.ChangeFeed, concurrency int) *historyReader {
	return &historyReader{feed: feed, turns: newFairTurns(concurrency), queues: map[historyKey][]*historyRequest{}}
}

// read returns the changes filter matches after `after`, in order, and
// reach: every such change up to reach has been returned (reach may be
// below after when the feed has not reached after yet).
func (h *historyReader) read(ctx context.Context, filter store.ChangeFilter, after int64) ([]store.Change, int64, error) {
	key := keyOf(filter)
	req := &historyRequest{after: after, done: make(chan historyResult, 1)}
	if u, ok := request.UserFrom(ctx); ok {
		req.user = u.GetName()
	}
	h.mu.Lock()
	queue, serving := h.queues[key]
	h.queues[key] = append(queue, req)
	h.mu.Unlock()
	if !serving {
		go h.serve(key)
	}
	select {
	case r := <-req.done:
		return r.changes, r.reach, r.err
	case <-ctx.Done():
		h.forget(key, req)
		return nil, 0, ctx.Err()
	}
}

// forget removes a request whose caller gave up, so it drives no query.
func (h *historyReader) forget(key historyKey, req *historyRequest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if queue, ok := h.queues[key]; ok {
		h.queues[key] = slices.DeleteFunc(queue, func(r *historyRequest) bool { return r == req })
	}
}

// serve queries for key's requests until none waits.
func (h *historyReader) serve(key historyKey) {
	for {
		h.mu.Lock()
		queue := h.queues[key]
		if len(queue) == 0 {
			delete(h.queues, key)
			h.mu.Unlock()
			return
		}
		from, user := queue[0].after, queue[0].user
		for _, r := range queue[1:] {
			from = min(from, r.after)
		}
		h.mu.Unlock()

		changes, readAt, err := h.query(key, from, user)
		reach := readAt
		if err == nil && len(changes) == HistoryBatch {
			reach = changes[len(changes)-1].ResourceVersion
		}
		h.answer(key, from, historyResult{changes: changes, reach: reach, err: err})
	}
}

// query reads one batch from `from`, in its turn among the history reads:
// waiting for the turn and the read itself each get historyReadTimeout, so
// time spent queueing behind other callers' reads never counts against the
// query's deadline (which, expired, makes the store suspect the database
// of hanging).
func (h *historyReader) query(key historyKey, from int64, user string) ([]store.Change, int64, error) {
	wait, cancelWait := context.WithTimeout(context.Background(), historyReadTimeout)
	defer cancelWait()
	if err := h.turns.acquire(wait, user); err != nil {
		return nil, 0, fmt.Errorf("waiting for a turn among %d history reads: %w", h.turns.n, err)
	}
	defer h.turns.release()
	ctx, cancel := context.WithTimeout(context.Background(), historyReadTimeout)
	defer cancel()
	historyReads.WithLabelValues("database").Inc()
	return h.feed.Changes(ctx, key.filter(), from, HistoryBatch)
}

// answer hands the result of a query from `from` to every request it
// covers, and keeps the others queued. A compacted `from` fails only the
// requests from there: a later position may still be resumable.
func (h *historyReader) answer(key historyKey, from int64, r historyResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var waiting []*historyRequest
	answered := 0
	for _, req := range h.queues[key] {
		switch {
		case r.err != nil && (req.after == from || !errors.Is(r.err, store.ErrCompacted)):
			req.done <- historyResult{err: r.err}
		case r.err == nil && req.after >= from && (req.after < r.reach || len(r.changes) < HistoryBatch):
			answered++
			req.done <- historyResult{changes: changesAfter(r.changes, req.after), reach: r.reach}
		default:
			waiting = append(waiting, req)
		}
	}
	if answered > 1 {
		historyReads.WithLabelValues("shared").Add(float64(answered - 1))
	}
	h.queues[key] = waiting
}

// changesAfter is the suffix of changes (in order) after version after.
func changesAfter(changes []store.Change, after int64) []store.Change {
	i, _ := slices.BinarySearchFunc(changes, after, func(c store.Change, v int64) int {
		if c.ResourceVersion <= v {
			return -1
		}
		return 1 // never 0: the search ends at the first change after v
	})
	return changes[i:]
}
