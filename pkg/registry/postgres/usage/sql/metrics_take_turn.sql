-- Registry-wide task $1 is this caller's to run unless a caller ran it in the
-- last $2 seconds; the database's clock decides (registry_task). Affects one
-- row when the caller won the turn.
INSERT INTO registry_task AS t (name, last_run) VALUES ($1, clock_timestamp())
ON CONFLICT (name) DO UPDATE SET last_run = EXCLUDED.last_run
WHERE t.last_run <= EXCLUDED.last_run - make_interval(secs => $2)
