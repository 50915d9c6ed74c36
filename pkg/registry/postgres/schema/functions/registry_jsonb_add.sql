-- registry_jsonb_add adds two objects of numbers key by key, dropping the
-- keys whose sum is zero.
CREATE OR REPLACE FUNCTION registry_jsonb_add(a jsonb, b jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(jsonb_object_agg(key, v) FILTER (WHERE v <> 0), '{}') FROM (
        SELECT key, sum(value::numeric) AS v
        FROM (SELECT * FROM jsonb_each_text(a) UNION ALL SELECT * FROM jsonb_each_text(b)) e
        GROUP BY key) s
$$;
