-- A standby's registry resourceVersion and the age in seconds of the last
-- commit it replayed (-1 when it has replayed none since it started, or is no standby).
SELECT (SELECT resource_version FROM registry_state LIMIT 1),
	coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8, -1)
