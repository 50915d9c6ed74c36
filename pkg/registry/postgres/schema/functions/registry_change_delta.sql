-- The keys of before whose values differ in after, but resource_version
-- (the entry's prev_rv): both are to_jsonb of a row of the same table, every
-- column a key.
CREATE OR REPLACE FUNCTION registry_change_delta(before jsonb, after jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(jsonb_object_agg(b.key, b.value), '{}') FROM jsonb_each(before) b
    WHERE b.key <> 'resource_version' AND b.value IS DISTINCT FROM after -> b.key
$$;
