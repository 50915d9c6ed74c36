-- Before publishing (write.go): waits for every earlier ticket's transaction
-- to end, unless this ticket is at most $1 past the published one; whether
-- it waited (migration 023).
SELECT registry_wait_tickets($1)
