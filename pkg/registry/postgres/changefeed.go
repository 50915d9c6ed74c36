package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// sqlChangesWindow reads a snapshot's registry version, the horizon and the
// last version within limit.
var sqlChangesWindow = statement("changefeed_window")

// sqlHistoryWindow is sqlChangesWindow for a filter's entries only.
var sqlHistoryWindow = statement("changefeed_history_window")

// Changes returns up to limit changes filter matches (a filter on a member
// needs a kind) with ResourceVersion > after, in order, read in one REPEATABLE READ READ ONLY transaction together with the
// registry resourceVersion (readAt) of that snapshot. Writers are serialized,
// so the snapshot holds every change up to readAt and none above. A limit of
// 0 or less returns no changes, only readAt. An after below the compaction
// horizon fails with store.ErrCompacted; an after above readAt is not an
// error (nothing is newer yet).
func (s *Store) Changes(ctx context.Context, filter store.ChangeFilter, after int64, limit int) ([]store.Change, int64, error) {
	if filter.Kind == "" && filter.ClusterID != "" {
		return nil, 0, fmt.Errorf("read changes of member %s: a change filter on a member needs a kind", filter.ClusterID)
	}
	var (
		changes []store.Change
		readAt  int64
	)
	// On a standby, only once it holds everything this process has seen
	// exist: the follower (and each watch it serves) then never reads an
	// older state than one it already passed on.
	err := s.readTxOn(ctx, s.feed, store.Freshness{AtLeast: s.standbys.seen.Load()}, func(tx pgx.Tx) error {
		changes = nil
		// upTo is the version of the last entry within limit, 0 if none.
		var horizon, upTo int64
		var ep epoch
		query, args := sqlChangesWindow, []any{after, max(limit, 0)}
		if filter.Kind != "" {
			query, args = sqlHistoryWindow, append(args, string(filter.Kind), filter.ClusterID)
		}
		err := tx.QueryRow(ctx, query, args...).Scan(&readAt, &horizon, &upTo, &ep.lostAfter, &ep.floor)
		if err != nil {
			return err
		}
		if after < horizon {
			return fmt.Errorf("%w: resourceVersion %d is older than the oldest resumable %d", store.ErrCompacted, after, horizon)
		}
		if ep.lost(after) {
			return fmt.Errorf("%w: resourceVersion %d was lost in a failover of the registry database (it holds changes up to %d, then from %d)",
				store.ErrCompacted, after, ep.lostAfter, ep.floor+1)
		}
		if upTo == 0 {
			return nil
		}
		byRV := map[int64]*store.Change{}
		for _, k := range feedKinds {
			if filter.Kind == "" || filter.Kind == k.feedKind() {
				if err := k.read(ctx, tx, filter.ClusterID, after, upTo, byRV); err != nil {
					return err
				}
			}
		}
		changes = make([]store.Change, 0, len(byRV))
		for _, c := range byRV {
			changes = append(changes, *c)
		}
		slices.SortFunc(changes, func(a, b store.Change) int { return cmp.Compare(a.ResourceVersion, b.ResourceVersion) })
		return nil
	})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// A read of a few changes that ran out of time: the server
			// is not answering (hung, or failed over from with its
			// sockets left open).
			s.abandonConnections()
		}
		return nil, 0, fmt.Errorf("read changes after %d: %w", after, interpretError(err))
	}
	s.saw(readAt)
	return changes, readAt, nil
}

// feedKinds are the kinds the change feed carries.
var feedKinds = []interface {
	feedKind() store.Kind
	read(ctx context.Context, tx pgx.Tx, clusterID string, after, upTo int64, byRV map[int64]*store.Change) error
}{nodeCapacityFeed, clusterNamespaceFeed, clusterCapacityFeed}

// feedKind decodes one view kind's log entries. An entry's object and
// prev_object are to_jsonb of a view row; jsonb_populate_record turns them
// back into the view table's row type, from which the kind's list columns
// are selected and scanned by the list's own scanner, so an entry decodes
// exactly as Get and List decode the row it was taken from.
type feedKind[T any] struct {
	kind store.Kind
	list listSpec[T]
	set  func(c *store.Change, v *T, prev bool)
}

var nodeCapacityFeed = feedKind[store.NodeCapacity]{
	kind: store.KindNodeCapacity,
	list: nodeCapacityList,
	set: func(c *store.Change, v *store.NodeCapacity, prev bool) {
		if prev {
			c.PrevNodeCapacity = v
		} else {
			c.NodeCapacity = v
		}
	},
}

var clusterNamespaceFeed = feedKind[store.ClusterNamespace]{
	kind: store.KindClusterNamespace,
	list: clusterNamespaceList,
	set: func(c *store.Change, v *store.ClusterNamespace, prev bool) {
		if prev {
			c.PrevClusterNamespace = v
		} else {
			c.ClusterNamespace = v
		}
	},
}

func (k feedKind[T]) feedKind() store.Kind { return k.kind }

// read adds this kind's entries with after < resource_version <= upTo to
// byRV, only clusterID's unless that is empty. The statement is assembled
// from the kind's table and list columns.
func (k feedKind[T]) read(ctx context.Context, tx pgx.Tx, clusterID string, after, upTo int64, byRV map[int64]*store.Change) error {
	rows, err := tx.Query(ctx, `
		SELECT c.resource_version, c.type, v.is_prev, `+prefixed("r", k.list.columns)+`
		FROM registry_change c
		CROSS JOIN LATERAL (VALUES (false, c.object), (true, c.prev_object)) AS v(is_prev, obj)
		CROSS JOIN LATERAL jsonb_populate_record(NULL::`+k.list.table+`, v.obj) AS r
		WHERE c.resource_version > $1 AND c.resource_version <= $2 AND c.kind = $3 AND v.obj IS NOT NULL
			AND ($4 = '' OR c.cluster_id = $4)`,
		after, upTo, string(k.kind), clusterID)
	if err != nil {
		return fmt.Errorf("read %s changes: %w", k.kind, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			rv     int64
			typ    string
			isPrev bool
		)
		v, err := k.list.scan(headRow{Row: rows, head: []any{&rv, &typ, &isPrev}})
		if err != nil {
			return fmt.Errorf("decode %s change %d: %w", k.kind, rv, err)
		}
		c := byRV[rv]
		if c == nil {
			c = &store.Change{ResourceVersion: rv, Type: store.ChangeType(typ), Kind: k.kind}
			byRV[rv] = c
		}
		k.set(c, &v, isPrev)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s changes: %w", k.kind, err)
	}
	return nil
}

// headRow scans a row's leading columns into head and the rest into the
// caller's targets, so a record scanner can read a row that carries more.
type headRow struct {
	pgx.Row
	head []any
}

func (r headRow) Scan(dest ...any) error {
	return r.Row.Scan(append(slices.Clip(r.head), dest...)...)
}
