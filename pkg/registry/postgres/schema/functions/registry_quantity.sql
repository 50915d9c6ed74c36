-- registry:called-by-migrations
-- registry_quantity is the amount a Kubernetes quantity string stands for,
-- in its base unit (cores, bytes, pods): "500m" is 0.5, "2Gi" 2147483648,
-- "1e3" 1000; NULL for text that is not a quantity. The quota amounts the
-- registry keeps are canonical strings (Quantity.String(), store.Quota), so
-- the suffixes are those of the three formats: decimal SI (n to E),
-- binary SI (Ki to Ei) and decimal exponents. One expression in SQL, so it
-- is inlined where it is called. Migration 030's backfill calls it
-- (through registry_quota_commitment), hence the first line.
CREATE OR REPLACE FUNCTION registry_quantity(q text) RETURNS numeric LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT trim_scale(substring(q FROM '^[+-]?[0-9]*\.?[0-9]+')::numeric * CASE substring(q FROM '^[+-]?[0-9]*\.?[0-9]+(.*)$')
        WHEN '' THEN 1 WHEN 'n' THEN 0.000000001 WHEN 'u' THEN 0.000001 WHEN 'm' THEN 0.001
        WHEN 'k' THEN 1000 WHEN 'M' THEN 1000000 WHEN 'G' THEN 1000000000 WHEN 'T' THEN 1000000000000
        WHEN 'P' THEN 1000000000000000 WHEN 'E' THEN 1000000000000000000
        WHEN 'Ki' THEN 1024 WHEN 'Mi' THEN 1048576 WHEN 'Gi' THEN 1073741824 WHEN 'Ti' THEN 1099511627776
        WHEN 'Pi' THEN 1125899906842624 WHEN 'Ei' THEN 1152921504606846976
        ELSE ('1e' || substring(q FROM '^[+-]?[0-9]*\.?[0-9]+[eE]([+-]?[0-9]+)$'))::numeric END)
$$;
