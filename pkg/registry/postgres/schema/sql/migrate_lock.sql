-- Tries the session advisory lock that serializes migrations across
-- replicas ($1, MigrationLockKey); true when taken. Replicas try it again
-- and again instead of waiting in pg_advisory_lock: a session waiting in a
-- statement holds a snapshot that an index build beside the writers
-- (CREATE INDEX CONCURRENTLY) waits for, while it waits for the lock the
-- build's session holds.
SELECT pg_try_advisory_lock($1)
