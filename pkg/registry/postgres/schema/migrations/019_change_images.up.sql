-- A change-log entry keeps its images in one value, images: a jsonb array of
-- the view row after the change (to_jsonb, as before) and, but for ADDED,
-- the row before it (issue 25). PostgreSQL compresses a value only in a row
-- over about 2 KB, each value on its own: a NodeCapacity's two images (1.6 KB
-- each) were compressed apart to about 1 KB each; in one value the second
-- is mostly references to the first, and a MODIFIED entry takes about half.
-- The entries kept are converted, so a watch resumes across the upgrade as
-- before; the trigger functions of 002 are replaced, and the triggers (002,
-- 009) call them by name.

ALTER TABLE registry_change ADD COLUMN images jsonb;
UPDATE registry_change SET images = CASE WHEN prev_object IS NULL THEN jsonb_build_array(object) ELSE jsonb_build_array(object, prev_object) END;
ALTER TABLE registry_change ALTER COLUMN images SET NOT NULL, DROP COLUMN object, DROP COLUMN prev_object;

-- Inserted rows: ADDED entries.
CREATE OR REPLACE FUNCTION registry_log_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    view_kind text := TG_ARGV[0];
    start_rv  bigint := (SELECT resource_version FROM registry_state);
BEGIN
    IF EXISTS (SELECT 1 FROM new_rows WHERE resource_version <= start_rv) THEN
        RAISE EXCEPTION '% row inserted without a new resource_version (start %)', view_kind, start_rv;
    END IF;
    INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, images)
    SELECT n.resource_version, view_kind, n.cluster_id, n.name, 'ADDED', jsonb_build_array(to_jsonb(n)) FROM new_rows n;
    RETURN NULL;
END $$;

-- Updated rows that changed: a MODIFIED entry with the old row as prev, or,
-- for a row already logged by this transaction, the new state folded into
-- that entry (which keeps its type and the state before the transaction:
-- its second image, if any).
CREATE OR REPLACE FUNCTION registry_log_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    view_kind text := TG_ARGV[0];
    start_rv  bigint := (SELECT resource_version FROM registry_state);
    changed   bigint;
    logged    bigint;
BEGIN
    -- Old and new rows are paired by grouping, not by a join: the planner
    -- can estimate a transition table at one row (it does for INSERT ... ON
    -- CONFLICT), and a nested-loop join would then be quadratic.
    WITH u AS (
        SELECT false AS is_new, o.cluster_id, o.name, o.resource_version AS rv, to_jsonb(o) AS obj FROM old_rows o
        UNION ALL
        SELECT true, n.cluster_id, n.name, n.resource_version, to_jsonb(n) FROM new_rows n
    ), ch AS (
        SELECT * FROM (
            SELECT cluster_id, name,
                max(rv) FILTER (WHERE NOT is_new) AS old_rv, max(rv) FILTER (WHERE is_new) AS new_rv,
                (array_agg(obj) FILTER (WHERE NOT is_new))[1] AS old_obj, (array_agg(obj) FILTER (WHERE is_new))[1] AS new_obj
            FROM u GROUP BY cluster_id, name) p
        WHERE old_obj IS DISTINCT FROM new_obj
    ), folded AS (
        UPDATE registry_change c SET resource_version = ch.new_rv, images = jsonb_set(c.images, '{0}', ch.new_obj)
        FROM ch WHERE ch.old_rv > start_rv AND ch.new_rv >= ch.old_rv
            AND c.resource_version > start_rv AND c.resource_version = ch.old_rv
        RETURNING 1
    ), added AS (
        INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, images)
        SELECT ch.new_rv, view_kind, ch.cluster_id, ch.name, 'MODIFIED', jsonb_build_array(ch.new_obj, ch.old_obj)
        FROM ch WHERE ch.old_rv <= start_rv AND ch.new_rv > start_rv
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM ch), (SELECT count(*) FROM folded) + (SELECT count(*) FROM added)
    INTO changed, logged;
    IF changed <> logged THEN
        RAISE EXCEPTION '% % rows changed without a new resource_version (start %)', changed - logged, view_kind, start_rv;
    END IF;
    RETURN NULL;
END $$;

-- Deleted rows: each takes a new version for its tombstone (object: the last
-- state at that version, prev: the last state). A row already logged by this
-- transaction reuses that entry: inserted then deleted leaves no entry,
-- modified then deleted becomes DELETED.
CREATE OR REPLACE FUNCTION registry_log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    view_kind text := TG_ARGV[0];
    start_rv  bigint := (SELECT resource_version FROM registry_state);
    deleted   bigint;
    logged    bigint;
BEGIN
    WITH gone AS (
        SELECT o.resource_version AS rv, o.cluster_id, o.name, to_jsonb(o) AS obj FROM old_rows o
    ), dropped AS (
        DELETE FROM registry_change c USING gone g
        WHERE g.rv > start_rv AND c.resource_version > start_rv AND c.resource_version = g.rv AND c.type = 'ADDED'
        RETURNING 1
    ), folded AS (
        UPDATE registry_change c SET type = 'DELETED', images = jsonb_set(c.images, '{0}', g.obj) FROM gone g
        WHERE g.rv > start_rv AND c.resource_version > start_rv AND c.resource_version = g.rv AND c.type <> 'ADDED'
        RETURNING 1
    ), fresh AS MATERIALIZED (
        SELECT nextval('registry_resource_version') AS rv, g.cluster_id, g.name, g.obj FROM gone g WHERE g.rv <= start_rv
    ), tombstones AS (
        INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, images)
        SELECT f.rv, view_kind, f.cluster_id, f.name, 'DELETED', jsonb_build_array(f.obj || jsonb_build_object('resource_version', f.rv), f.obj)
        FROM fresh f
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM gone),
        (SELECT count(*) FROM dropped) + (SELECT count(*) FROM folded) + (SELECT count(*) FROM tombstones)
    INTO deleted, logged;
    IF deleted <> logged THEN
        RAISE EXCEPTION '% % rows stamped by this transaction have no log entry (start %)', deleted - logged, view_kind, start_rv;
    END IF;
    RETURN NULL;
END $$;
