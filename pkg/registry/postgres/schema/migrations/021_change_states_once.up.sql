-- The change log keeps each state of a view row once (issue 25): an entry
-- stores the row before it (prev_object, with that state's version in
-- prev_rv), not the row after it. The state after an entry is the next
-- entry's prev_object (the entry whose prev_rv is its version) or, for a
-- row's latest entry, the live row; a DELETED entry's is its prev_object at
-- the tombstone's version. An ADDED entry stores no image at all. Until now
-- every state but a row's first was stored twice, as one entry's object and
-- the next one's previous object: a NodeCapacity's ADDED entry took 1.2 KB
-- and its first usage report 1.3 KB; they now take none and 1.6 KB
-- (one image of a node is under PostgreSQL's 2 KB compression threshold).
-- prev_object leaves out the row's NULL columns (jsonb_strip_nulls), which
-- jsonb_populate_record restores as NULL.
-- The entries kept are converted, so a watch resumes across the upgrade.
--
-- A DELETED entry folded from a row modified then deleted in one
-- transaction now reads as the last committed state (the one before the
-- transaction), never an uncommitted one.

ALTER TABLE registry_change ADD COLUMN prev_rv bigint, ADD COLUMN prev_object jsonb;
UPDATE registry_change SET prev_object = jsonb_strip_nulls(images->1), prev_rv = (images->1->>'resource_version')::bigint
    WHERE type <> 'ADDED';
ALTER TABLE registry_change DROP COLUMN images,
    ADD CONSTRAINT registry_change_prev CHECK ((type = 'ADDED') = (prev_rv IS NULL) AND (prev_rv IS NULL) = (prev_object IS NULL));
-- The entry that superseded a state; unique, since a state is superseded once.
CREATE UNIQUE INDEX registry_change_prev_rv_idx ON registry_change (prev_rv) WHERE prev_rv IS NOT NULL;

-- Inserted rows: ADDED entries, without an image (the row is the live one,
-- or the next entry's prev_object).
CREATE OR REPLACE FUNCTION registry_log_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    view_kind text := TG_ARGV[0];
    start_rv  bigint := (SELECT resource_version FROM registry_state);
BEGIN
    IF EXISTS (SELECT 1 FROM new_rows WHERE resource_version <= start_rv) THEN
        RAISE EXCEPTION '% row inserted without a new resource_version (start %)', view_kind, start_rv;
    END IF;
    INSERT INTO registry_change (resource_version, kind, cluster_id, name, type)
    SELECT n.resource_version, view_kind, n.cluster_id, n.name, 'ADDED' FROM new_rows n;
    RETURN NULL;
END $$;

-- Updated rows that changed: a MODIFIED entry with the old row as its
-- prev_object, or, for a row already logged by this transaction, that
-- entry moved to the new version (it keeps its type and the state before
-- the transaction).
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
        UPDATE registry_change c SET resource_version = ch.new_rv
        FROM ch WHERE ch.old_rv > start_rv AND ch.new_rv >= ch.old_rv
            AND c.resource_version > start_rv AND c.resource_version = ch.old_rv
        RETURNING 1
    ), added AS (
        INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, prev_rv, prev_object)
        SELECT ch.new_rv, view_kind, ch.cluster_id, ch.name, 'MODIFIED', ch.old_rv, jsonb_strip_nulls(ch.old_obj)
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

-- Deleted rows: each takes a new version for its tombstone, whose
-- prev_object is the last state. A row already logged by this transaction
-- reuses that entry: inserted then deleted leaves no entry, modified then
-- deleted becomes DELETED (its prev_object the state before the
-- transaction, the last one committed).
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
        UPDATE registry_change c SET type = 'DELETED' FROM gone g
        WHERE g.rv > start_rv AND c.resource_version > start_rv AND c.resource_version = g.rv AND c.type <> 'ADDED'
        RETURNING 1
    ), tombstones AS (
        INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, prev_rv, prev_object)
        SELECT nextval('registry_resource_version'), view_kind, g.cluster_id, g.name, 'DELETED', g.rv, jsonb_strip_nulls(g.obj)
        FROM gone g WHERE g.rv <= start_rv
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
