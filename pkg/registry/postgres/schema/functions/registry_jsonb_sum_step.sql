-- The aggregate registry_jsonb_sum sums objects of numbers (pods'
-- requests_other) key by key, dropping zero sums (registry_jsonb_add); '{}'
-- over no rows. registry_jsonb_sum_step is its step.
CREATE OR REPLACE FUNCTION registry_jsonb_sum_step(acc jsonb, x jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN x IS NULL OR x = '{}' THEN acc ELSE registry_jsonb_add(acc, x) END
$$;
CREATE OR REPLACE AGGREGATE registry_jsonb_sum(jsonb) (SFUNC = registry_jsonb_sum_step, STYPE = jsonb, INITCOND = '{}');
