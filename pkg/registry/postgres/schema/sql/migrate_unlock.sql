-- Releases migrate_lock ($1, migrationLockKey).
SELECT pg_advisory_unlock($1)
