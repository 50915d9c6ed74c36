-- registry_define_log_update (re)creates registry_log_update_<table>, the
-- update log trigger function of a view table, with one comparison for
-- each column the table has now, and points the table's update trigger at
-- it (issue 25: converting both rows with to_jsonb and comparing the
-- images key by key took half of an UPDATE of 1,000 node rows). The
-- functions it makes are the one kind without a file of their own: they
-- follow their table's columns, so a migration that adds a column to a
-- view table calls it again (TestLogTriggersCompareEveryColumn fails if
-- one did not), and the call at the end makes every view table's function
-- anew whenever this template changes.
CREATE OR REPLACE FUNCTION registry_define_log_update(tbl regclass, kind text) RETURNS void LANGUAGE plpgsql AS $define$
DECLARE
    rel   text := (SELECT relname FROM pg_class WHERE oid = tbl);
    fn    text := 'registry_log_update_' || rel;
    delta text;
BEGIN
    -- The old value of each column that differs, a NULL as JSON null
    -- (jsonb_build_object converts values as to_jsonb does); never the
    -- version, which the entry's prev_rv holds.
    SELECT string_agg(format('CASE WHEN (o).%1$I IS DISTINCT FROM (n).%1$I THEN jsonb_build_object(%1$L, (o).%1$I) ELSE ''{}'' END',
            attname), E'\n            || ' ORDER BY attnum)
        INTO delta
        FROM pg_attribute WHERE attrelid = tbl AND attnum > 0 AND NOT attisdropped AND attname <> 'resource_version';
    EXECUTE format($fn$
CREATE OR REPLACE FUNCTION %1$I() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
    start_rv bigint := (SELECT resource_version FROM registry_state);
    changed  bigint;
    logged   bigint;
BEGIN
    -- Old and new rows are paired by grouping, not by a join: the planner
    -- can estimate a transition table at one row (it does for INSERT ... ON
    -- CONFLICT), and a nested-loop join would then be quadratic.
    WITH u AS (
        SELECT false AS is_new, r::%4$s AS r FROM old_rows r
        UNION ALL
        SELECT true, r::%4$s FROM new_rows r
    ), ch AS (
        SELECT (o).cluster_id, (o).name, (o).resource_version AS old_rv, (n).resource_version AS new_rv, o, n FROM (
            SELECT (array_agg(r) FILTER (WHERE NOT is_new))[1] AS o, (array_agg(r) FILTER (WHERE is_new))[1] AS n
            FROM u GROUP BY (r).cluster_id, (r).name) p
        WHERE o IS DISTINCT FROM n
    ), folded AS (
        -- A row this transaction logged already: its entry moves to the
        -- new version, its delta now to the new row (rare: images here).
        UPDATE registry_change c SET resource_version = ch.new_rv,
            prev_delta = CASE WHEN c.type = 'MODIFIED' THEN registry_change_delta(to_jsonb(ch.o) || c.prev_delta, to_jsonb(ch.n)) END
        FROM ch WHERE ch.old_rv > start_rv AND ch.new_rv >= ch.old_rv
            AND c.resource_version > start_rv AND c.resource_version = ch.old_rv
        RETURNING 1
    ), added AS (
        INSERT INTO registry_change (resource_version, kind, cluster_id, name, type, prev_rv, prev_delta)
        SELECT ch.new_rv, %2$L, ch.cluster_id, ch.name, 'MODIFIED', ch.old_rv,
            %3$s
        FROM ch WHERE ch.old_rv <= start_rv AND ch.new_rv > start_rv
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM ch), (SELECT count(*) FROM folded) + (SELECT count(*) FROM added)
    INTO changed, logged;
    IF changed <> logged THEN
        RAISE EXCEPTION '%% %% rows changed without a new resource_version (start %%)', changed - logged, %2$L, start_rv;
    END IF;
    RETURN NULL;
END $body$
$fn$, fn, kind, delta, tbl);
    EXECUTE format('CREATE OR REPLACE TRIGGER %1$I AFTER UPDATE ON %2$s REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION %3$I()', rel || '_log_update', tbl, fn);
END $define$;
-- Every view table: the tables whose inserted rows registry_log_insert logs,
-- with the kind their insert trigger passes it (registry_define_view).
SELECT registry_define_log_update(g.tgrelid::regclass, convert_from(substring(g.tgargs FOR position('\x00'::bytea IN g.tgargs) - 1), 'UTF8'))
FROM pg_trigger g WHERE g.tgfoid = 'registry_log_insert'::regproc AND NOT g.tgisinternal;
