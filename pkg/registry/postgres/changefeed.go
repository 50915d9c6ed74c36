package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// sqlChangesWindow reads a snapshot's registry version, the horizon and the
// last version within limit.
var sqlChangesWindow = statement("changefeed_window")

// sqlHistoryWindow is sqlChangesWindow for a watch's filter's entries only.
var sqlHistoryWindow = statement("changefeed_history_window")

// sqlKindsWindow is sqlChangesWindow for the entries of a list of kinds.
var sqlKindsWindow = statement("changefeed_kinds_window")

// Changes returns up to limit changes filter matches (a filter on a member
// needs a kind) with ResourceVersion > after, in order, read in one REPEATABLE READ READ ONLY transaction together with the
// registry resourceVersion (readAt) of that snapshot. A writer publishes
// its versions only after every earlier commit ticket committed or
// aborted, so the snapshot holds every change up to readAt and none above. A limit of
// 0 or less returns no changes, only readAt. An after below the compaction
// horizon fails with store.ErrCompacted; an after above readAt is not an
// error (nothing is newer yet).
func (s *Store) Changes(ctx context.Context, filter store.ChangeFilter, after int64, limit int) ([]store.Change, int64, error) {
	if err := filter.Validate(); err != nil {
		return nil, 0, err
	}
	kinds := filter.KindList()
	var (
		changes []store.Change
		readAt  int64
	)
	// Read before the transaction: every version seen was published before
	// its snapshot, so a present below it is the registry gone back.
	seenBefore := s.standbys.seen.Load()
	// On a standby, only once it holds everything this process has seen
	// exist: the follower (and each watch it serves) then never reads an
	// older state than one it already passed on.
	err := s.readTxOn(ctx, s.feed, store.Freshness{AtLeast: s.standbys.seen.Load()}, func(tx pgx.Tx) error {
		changes = nil
		// upTo is the version of the last entry within limit, 0 if none.
		var horizon, upTo int64
		var ep epoch
		query, args := sqlChangesWindow, []any{after, max(limit, 0)}
		switch {
		case filter.Kind != "":
			query, args = sqlHistoryWindow, append(args, string(filter.Kind), filter.ClusterID)
		case kinds != nil:
			query, args = sqlKindsWindow, append(args, kinds)
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
		for _, v := range s.views {
			if kinds == nil || slices.Contains(kinds, v.storeKind()) {
				if err := v.readChanges(ctx, tx, filter.ClusterID, after, upTo, byRV); err != nil {
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
			s.abandonConnections(ctx)
		}
		return nil, 0, fmt.Errorf("read changes after %d: %w", after, pgdb.InterpretError(err))
	}
	if readAt < seenBefore {
		// Gone back: reading on would hand the versions out again.
		if err := s.recordRewind(ctx, seenBefore); err != nil {
			return nil, 0, fmt.Errorf("record that the registry went back from %d to %d: %w", seenBefore, readAt, pgdb.InterpretError(err))
		}
		return nil, 0, fmt.Errorf("%w: the registry's resourceVersion went back from %d, read before, to %d (restored from a backup, or lost commits); recorded as a failover",
			store.ErrCompacted, seenBefore, readAt)
	}
	s.saw(readAt)
	return changes, readAt, nil
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
