-- The registry's epoch: which PostgreSQL timeline its primary is on, and
-- what a failover lost (docs/registry.md, "Failover"). A standby promoted
-- after a failover starts a new timeline and may lack the last commits of
-- the old primary, whose resourceVersions clients may have seen; the first
-- connection to the new primary notices the timeline change, records the
-- registry's present as lost_after, moves the resourceVersion sequence far
-- past anything handed out (floor), and the change feed answers watches
-- and continue tokens between the two with 410.
CREATE TABLE registry_epoch (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    timeline   text NOT NULL,
    lost_after bigint NOT NULL DEFAULT 0,
    floor      bigint NOT NULL DEFAULT 0,
    failovers  bigint NOT NULL DEFAULT 0,
    changed_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO registry_epoch (timeline)
    SELECT CASE WHEN pg_is_in_recovery() THEN '' ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END;
