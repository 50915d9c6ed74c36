-- The session advisory lock that serializes migrations across replicas ($1,
-- migrationLockKey).
SELECT pg_advisory_lock($1)
