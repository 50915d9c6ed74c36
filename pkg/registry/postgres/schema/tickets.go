package schema

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// TicketClass is the first key of the commit tickets' advisory locks
// (migration 023; the functions registry_take_ticket and
// registry_wait_tickets take them): (TicketClass, ticket mod 2^31) for each
// ticket, and (TicketClass, -1), the barrier every ticket holder shares and
// a failover takes alone (TakeTicketsAlone).
const TicketClass = 0x7469636b // "tick"

// TakeTicketsAlone takes the commit tickets' barrier alone for the rest of
// tx: the tickets in flight end first, and new ones wait until it ends.
func TakeTicketsAlone(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, -1)`, TicketClass)
	return err
}
