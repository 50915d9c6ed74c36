-- How far a standby has replayed: its registry resourceVersion, and the
-- newest schema migration it holds (a standby replays migrations too, a
-- moment after the primary applied them).
SELECT (SELECT resource_version FROM registry_state LIMIT 1), coalesce((SELECT max(version) FROM schema_migrations), 0)
