package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"k8s.io/klog/v2"
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

// epoch is the registry's record of failovers (migration 007).
type epoch struct {
	// lostAfter and floor bound the versions a failover lost: a change
	// with lostAfter < version < floor may have been seen by clients but
	// is not in the registry; watches and continue tokens from there get
	// 410. Both are 0 until a failover.
	lostAfter, floor int64
}

// sqlEpoch reads the recorded failover bounds.
var sqlEpoch = statement("epoch_bounds")

// lost reports whether a client at rv may have seen changes a failover lost.
func (e epoch) lost(rv int64) bool { return rv > e.lostAfter && rv < e.floor }

// timelineQuery names the primary's WAL timeline (the first 8 hex digits of
// its WAL file name); it changes when a standby is promoted or a backup is
// restored with recovery.
const timelineQuery = `SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery() THEN '' ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END`

// afterConnect runs on every new connection to the primary, before it
// serves anything: it records a failover (checkTimeline) and keeps the
// floor of the current timeline for readPool.
func (s *Store) afterConnect(ctx context.Context, conn *pgx.Conn) error {
	if err := checkTimeline(ctx, conn); err != nil {
		return err
	}
	var ep epoch
	err := conn.QueryRow(ctx, sqlEpoch).Scan(&ep.lostAfter, &ep.floor)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable, errors.Is(err, pgx.ErrNoRows): // migrations pending
		return nil
	case err != nil:
		return err
	}
	raise(&s.standbys.floor, ep.floor)
	s.standbys.floorKnown.Store(true)
	return nil
}

// checkTimeline records a failover: on a new timeline it records it once
// for all replicas (the epoch row is locked), before this connection writes
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
		// Alone against every commit ticket: those in flight end first,
		// and new ones wait until the floor is set.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, -1)`, TicketClass); err != nil {
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
		lostAfter, floor, err := moveVersionsPastFailover(ctx, tx)
		if err != nil {
			return fmt.Errorf("move the resourceVersions past the failover: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE registry_state SET resource_version = $1`, floor); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			UPDATE registry_epoch SET timeline = $1, lost_after = $2, floor = $3, failovers = failovers + 1, changed_at = now()`,
			timeline, lostAfter, floor); err != nil {
			return err
		}
		klog.FromContext(ctx).Info("The registry database failed over to a new primary: resourceVersions after the last one it holds may have been lost; watches and continue tokens from there get 410",
			"timeline", timeline, "previousTimeline", recorded, "lostAfter", lostAfter, "floor", floor)
		failoversTotal.Inc()
		return nil
	})
}

// moveVersionsPastFailover moves the versions writers take far past the
// registry's surviving present and returns both. With commit tickets
// (migration 023) the ticket sequence moves failoverTickets past the
// present's ticket and the last ticket taken; before that migration, the
// old resourceVersion sequence moves 2^42 past the present.
func moveVersionsPastFailover(ctx context.Context, tx pgx.Tx) (present, floor int64, err error) {
	var tickets bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('registry_ticket') IS NOT NULL`).Scan(&tickets); err != nil {
		return 0, 0, err
	}
	if !tickets {
		err = tx.QueryRow(ctx, `
			WITH s AS (SELECT resource_version AS present FROM registry_state FOR UPDATE),
			     f AS (SELECT s.present, greatest(s.present, (SELECT last_value FROM registry_resource_version)) + $1 AS floor FROM s)
			SELECT f.present, setval('registry_resource_version', f.floor) FROM f`, int64(failoverTickets)<<ticketBits).Scan(&present, &floor)
		return present, floor, err
	}
	err = tx.QueryRow(ctx, `
		WITH s AS (SELECT resource_version AS present FROM registry_state FOR UPDATE),
		     f AS (SELECT s.present, greatest(s.present >> $2, (SELECT last_value FROM registry_ticket)) + 1 + $1 AS ticket FROM s)
		SELECT f.present, setval('registry_ticket', f.ticket) << $2 FROM f`, int64(failoverTickets), ticketBits).Scan(&present, &floor)
	return present, floor, err
}
