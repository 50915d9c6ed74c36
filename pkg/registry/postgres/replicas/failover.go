package replicas

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
)

// failoverTickets is how many commit tickets past the registry's surviving
// present a failover moves the ticket sequence (migration 023): more than
// the commits an old primary can have made that never reached its standby,
// so no version a client saw is handed out again. Each ticket holds 2^22
// versions, so this is 2^42 versions, and an int64 lasts 2^21 failovers.
const failoverTickets = 1 << 20

// ticketBits is how many low bits of a resourceVersion count within a
// ticket (migration 023).
const ticketBits = 22

// LostVersions is the range of versions the registry's failovers and
// rewinds lost, as recorded in the table registry_epoch (migration 007; the
// table keeps its name for history: "epoch" in the code means only a
// member's ownership, store.Fence.Epoch).
type LostVersions struct {
	// LostAfter and Floor bound the versions a failover lost: a change
	// with LostAfter < version < Floor may have been seen by clients but
	// is not in the registry; watches and continue tokens from there get
	// 410. Both are 0 until a failover.
	LostAfter, Floor int64
}

// sqlLostVersions reads the recorded failover bounds.
var sqlLostVersions = statement("lost_versions")

// Lost reports whether a client at rv may have seen changes a failover lost.
func (e LostVersions) Lost(rv int64) bool { return rv > e.LostAfter && rv < e.Floor }

// ReadLostVersions reads the recorded failover bounds with q, a connection or a
// transaction (a reader's snapshot, to judge a version it began at).
func ReadLostVersions(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (LostVersions, error) {
	var ep LostVersions
	err := q.QueryRow(ctx, sqlLostVersions).Scan(&ep.LostAfter, &ep.Floor)
	return ep, err
}

// timelineQuery names the primary's WAL timeline (the first 8 hex digits of
// its WAL file name); it changes when a standby is promoted or a backup is
// restored with recovery.
const timelineQuery = `SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery() THEN '' ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END`

// AfterConnect runs on every new connection to the primary, before it
// serves anything (pgxpool.Config.AfterConnect): it records a failover
// (checkTimeline) and keeps the floor of the current timeline for readPool.
func (r *Set) AfterConnect(ctx context.Context, conn *pgx.Conn) error {
	if err := checkTimeline(ctx, conn); err != nil {
		return err
	}
	ep, err := ReadLostVersions(ctx, conn)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable, errors.Is(err, pgx.ErrNoRows): // migrations pending
		return nil
	case err != nil:
		return err
	}
	r.learnFloor(ep.Floor)
	return nil
}

// checkTimeline records a failover: on a new timeline it records it once
// for all replicas (the registry_epoch row is locked), before this connection writes
// or reads. A database not migrated yet, or a standby, is left alone.
func checkTimeline(ctx context.Context, conn *pgx.Conn) error {
	var recovering bool
	var timeline string
	if err := conn.QueryRow(ctx, timelineQuery).Scan(&recovering, &timeline); err != nil || recovering {
		return err
	}
	var recorded string
	err := conn.QueryRow(ctx, `SELECT timeline FROM registry_epoch`).Scan(&recorded)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable: // migrations pending
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return err
	case recorded == timeline:
		return nil
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := schema.TakeTicketsAlone(ctx, tx); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT timeline FROM registry_epoch FOR UPDATE`).Scan(&recorded); err != nil {
			return err
		}
		if recorded == timeline {
			return nil // another replica recorded it first
		}
		if recorded == "" {
			// Migrated on a standby's connection (no timeline known):
			// nothing to compare with; record this one.
			_, err := tx.Exec(ctx, `UPDATE registry_epoch SET timeline = $1, changed_at = now()`, timeline)
			return err
		}
		lostAfter, floor, err := recordFailover(ctx, tx, 0, timeline)
		if err != nil {
			return err
		}
		klog.FromContext(ctx).Info("The registry database failed over to a new primary: resourceVersions after the last one it holds may have been lost; watches and continue tokens from there get 410",
			"timeline", timeline, "previousTimeline", recorded, "lostAfter", lostAfter, "floor", floor)
		return nil
	})
}

// recordFailover records in tx, which holds the tickets' barrier alone
// (schema.TakeTicketsAlone) and the registry_epoch row, that the versions above the
// registry's present may have been lost: it moves the versions writers take
// far past the present and seen (moveVersionsPast), sets the present to
// that floor, and counts one more failover with its lost range (and the
// new timeline, unless empty). It returns the range's bounds.
func recordFailover(ctx context.Context, tx pgx.Tx, seen int64, timeline string) (lostAfter, floor int64, err error) {
	lostAfter, floor, err = moveVersionsPast(ctx, tx, seen)
	if err != nil {
		return 0, 0, fmt.Errorf("move the resourceVersions past the lost ones: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE registry_state SET resource_version = $1`, floor); err != nil {
		return 0, 0, err
	}
	if _, err := tx.Exec(ctx, `
		UPDATE registry_epoch SET timeline = coalesce(nullif($1, ''), timeline), lost_after = $2, floor = $3, failovers = failovers + 1, changed_at = now()`,
		timeline, lostAfter, floor); err != nil {
		return 0, 0, err
	}
	failoversTotal.Inc()
	return lostAfter, floor, nil
}

// RecordRewind records that the registry's present went back below seen, a
// version this process read from it (a registry restored from a backup or
// a volume snapshot, a crash that lost acknowledged commits: the same
// timeline, so checkTimeline sees nothing), as a failover: once for all
// replicas, alone against every commit ticket, it moves the versions
// writers take far past both the present and seen, so none a client saw
// is handed out again, and records the lost range, so watches and continue
// tokens from inside it get 410 and discovery's writers, fenced by the
// failover count, claim their members again and mirror what was lost.
// It writes in a transaction of writes, the primary's pool for writes.
func RecordRewind(ctx context.Context, writes *pgdb.Pool, seen int64) error {
	return pgx.BeginFunc(ctx, writes, func(tx pgx.Tx) error {
		if err := schema.TakeTicketsAlone(ctx, tx); err != nil {
			return err
		}
		var present int64
		if err := tx.QueryRow(ctx, `SELECT s.resource_version FROM registry_state s, registry_epoch e FOR UPDATE OF e`).Scan(&present); err != nil {
			return err
		}
		if present >= seen {
			return nil // another replica recorded it first
		}
		lostAfter, floor, err := recordFailover(ctx, tx, seen, "")
		if err != nil {
			return err
		}
		klog.FromContext(ctx).Error(nil, "The registry's resourceVersion went back below one this replica already read: restored from a backup or a snapshot, or it lost acknowledged commits. "+
			"Recorded as a failover: watches and continue tokens from the lost versions get 410, and discovery mirrors its members again",
			"present", lostAfter, "read", seen, "floor", floor)
		rewindsTotal.Inc()
		return nil
	})
}

// moveVersionsPast moves the versions writers take far past the
// registry's surviving present and seen (a version it no longer holds but
// a client may have seen; 0 if none) and returns the present and the new
// floor. With commit tickets (migration 023) the ticket sequence moves
// failoverTickets past the present's ticket, seen's and the last ticket
// taken; before that migration, the old resourceVersion sequence moves
// 2^42 past the present and seen.
func moveVersionsPast(ctx context.Context, tx pgx.Tx, seen int64) (present, floor int64, err error) {
	var tickets bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('registry_ticket') IS NOT NULL`).Scan(&tickets); err != nil {
		return 0, 0, err
	}
	if !tickets {
		err = tx.QueryRow(ctx, `
			WITH s AS (SELECT resource_version AS present FROM registry_state FOR UPDATE),
			     f AS (SELECT s.present, greatest(s.present, $2::bigint, (SELECT last_value FROM registry_resource_version)) + $1 AS floor FROM s)
			SELECT f.present, setval('registry_resource_version', f.floor) FROM f`, int64(failoverTickets)<<ticketBits, seen).Scan(&present, &floor)
		return present, floor, err
	}
	err = tx.QueryRow(ctx, `
		WITH s AS (SELECT resource_version AS present FROM registry_state FOR UPDATE),
		     f AS (SELECT s.present, greatest(s.present >> $2, $3::bigint >> $2, (SELECT last_value FROM registry_ticket)) + 1 + $1 AS ticket FROM s)
		SELECT f.present, setval('registry_ticket', f.ticket) << $2 FROM f`, int64(failoverTickets), ticketBits, seen).Scan(&present, &floor)
	return present, floor, err
}
