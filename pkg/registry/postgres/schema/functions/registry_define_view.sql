-- registry:called-by-migrations
-- registry_define_view makes tbl a view table whose rows the change log
-- follows as kind: the table's three log triggers, as every view table has
-- them (<table>_log_insert, <table>_log_update made by
-- registry_define_log_update, <table>_log_delete), and kind in the change
-- log's list of kinds (registry_change_kind_check) if the list lacks it.
-- The list grows as a NOT VALID constraint: every row the old list admitted
-- the longer one admits, so the change log's rows (millions) are not
-- checked again while writers wait for the table; rows written from then on
-- are. Calling it again changes nothing. A new kind's migration creates its
-- table and calls it (docs/kinds.md, "How to add a kind"); so this file is
-- applied before the migrations after 028 as well (the first line).
CREATE OR REPLACE FUNCTION registry_define_view(tbl regclass, kind text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    rel   text := (SELECT relname FROM pg_class WHERE oid = tbl);
    kinds text[];
BEGIN
    IF kind !~ '^[A-Z][A-Za-z0-9]*$' THEN
        RAISE EXCEPTION 'registry_define_view(%, %): a kind is an API kind name, such as NodeCapacity', tbl, kind;
    END IF;
    EXECUTE format('CREATE OR REPLACE TRIGGER %I AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION registry_log_insert(%L)', rel || '_log_insert', tbl, kind);
    PERFORM registry_define_log_update(tbl, kind);
    EXECUTE format('CREATE OR REPLACE TRIGGER %I AFTER DELETE ON %s REFERENCING OLD TABLE AS old_rows
        FOR EACH STATEMENT EXECUTE FUNCTION registry_log_delete(%L)', rel || '_log_delete', tbl, kind);

    -- The list as PostgreSQL prints it: CHECK ((kind = ANY (ARRAY['A'::text, ...]))).
    SELECT array_agg(m.k[1] ORDER BY m.n) INTO kinds
    FROM pg_constraint c, regexp_matches(pg_get_constraintdef(c.oid), '''([A-Za-z0-9]+)''::text', 'g') WITH ORDINALITY AS m(k, n)
    WHERE c.conrelid = 'registry_change'::regclass AND c.conname = 'registry_change_kind_check';
    IF kinds IS NULL THEN
        RAISE EXCEPTION 'registry_define_view(%, %): registry_change has no list of kinds (registry_change_kind_check)', tbl, kind;
    END IF;
    IF kind = ANY (kinds) THEN
        RETURN;
    END IF;
    EXECUTE format('ALTER TABLE registry_change DROP CONSTRAINT registry_change_kind_check,
        ADD CONSTRAINT registry_change_kind_check CHECK (kind IN (%s)) NOT VALID',
        (SELECT string_agg(quote_literal(k), ', ' ORDER BY n) FROM unnest(kinds || kind) WITH ORDINALITY AS u(k, n)));
END $$;
