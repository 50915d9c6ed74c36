-- Before publishing (write.go): waits for every earlier ticket's transaction
-- to end, unless this ticket is at most $1 past the published one; whether
-- it waited (migration 023): a shared lock on each ticket in between, or,
-- past 64 of them, on each earlier ticket still in flight, found in
-- pg_locks (migration 026).
SELECT registry_wait_tickets($1)
