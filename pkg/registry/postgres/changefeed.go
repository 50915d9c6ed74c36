package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres/changelog"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/replicas"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// The change log is package changelog's; the store picks the server its
// reads go to and keeps what the process has seen.

// Changes returns up to limit changes filter matches (a filter on a member
// needs a kind) with ResourceVersion > after, in order, read in one REPEATABLE READ READ ONLY transaction together with the
// registry resourceVersion (readAt) of that snapshot (changelog.Log.Read). A writer publishes
// its versions only after every earlier commit ticket committed or
// aborted, so the snapshot holds every change up to readAt and none above. A limit of
// 0 or less returns no changes, only readAt. An after below the compaction
// horizon fails with store.ErrCompacted; an after above readAt is not an
// error (nothing is newer yet).
func (s *Store) Changes(ctx context.Context, filter store.ChangeFilter, after int64, limit int) ([]store.Change, int64, error) {
	if err := filter.Validate(); err != nil {
		return nil, 0, err
	}
	var (
		changes []store.Change
		readAt  int64
	)
	// Read before the transaction: every version seen was published before
	// its snapshot, so a present below it is the registry gone back.
	seenBefore := s.LatestSeen()
	// On a standby, only once it holds everything this process has seen
	// exist: the follower (and each watch it serves) then never reads an
	// older state than one it already passed on.
	err := s.replicas.ReadTx(ctx, s.feed, store.Freshness{AtLeast: s.LatestSeen()}, func(tx pgx.Tx) error {
		var err error
		changes, readAt, err = s.changeLog.Read(ctx, tx, filter, after, limit)
		return err
	})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// A read of a few changes that ran out of time: the server
			// is not answering (hung, or failed over from with its
			// sockets left open).
			s.listener.Abandon(ctx)
		}
		return nil, 0, fmt.Errorf("read changes after %d: %w", after, pgdb.InterpretError(err))
	}
	if readAt < seenBefore {
		// Gone back: reading on would hand the versions out again.
		if err := replicas.RecordRewind(ctx, s.writes, seenBefore); err != nil {
			return nil, 0, fmt.Errorf("record that the registry went back from %d to %d: %w", seenBefore, readAt, pgdb.InterpretError(err))
		}
		return nil, 0, fmt.Errorf("%w: the registry's resourceVersion went back from %d, read before, to %d (restored from a backup, or lost commits); recorded as a failover",
			store.ErrCompacted, seenBefore, readAt)
	}
	s.replicas.Saw(readAt)
	return changes, readAt, nil
}

// Compact deletes change-log entries committed before olderThan and returns
// the new horizon (changelog.Compact).
func (s *Store) Compact(ctx context.Context, olderThan time.Time) (int64, error) {
	return changelog.Compact(ctx, s.writes, olderThan)
}

// Notifications delivers a value soon after each commit that changed the
// registry, coalesced in a channel of capacity 1
// (changelog.Listener.Notifications). Call it once and fan out.
func (s *Store) Notifications(ctx context.Context) (<-chan struct{}, error) {
	return s.listener.Notifications(ctx)
}

// registryLog is the change log of the registry's views.
var registryLog = changelog.New(views.InChangeLog()...)

// changeLogOf is the change log of the registry's views and ext's.
func changeLogOf(ext Extension) *changelog.Log {
	if len(ext.Views) == 0 {
		return registryLog
	}
	return changelog.New(append(views.InChangeLog(), ext.Views...)...)
}
