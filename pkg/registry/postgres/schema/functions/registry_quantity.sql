-- registry:called-by-migrations
-- registry_quantity is the amount a Kubernetes quantity string stands for,
-- in its base unit (cores, bytes, pods): "500m" is 0.5, "2Gi" 2147483648,
-- "1e3" 1000; NULL for text that is not a quantity. The quota amounts the
-- registry keeps are canonical strings (Quantity.String(), store.Quota), so
-- the suffixes are those of the three formats: decimal SI (n to E), binary
-- SI (Ki to Ei) and decimal exponents, which numeric reads itself. One
-- expression in SQL, so it is inlined where it is called; one regular
-- expression (the check), the rest string functions: 1.3 µs a call where
-- three regular expressions took 2. Migration 030's backfill calls it
-- (through registry_quota_commitment), hence the first line.
CREATE OR REPLACE FUNCTION registry_quantity(q text) RETURNS numeric LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN q ~ '^[+-]?[0-9]*\.?[0-9]+([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$' THEN trim_scale(CASE translate(q, '0123456789.+-', '')
        WHEN '' THEN q::numeric
        WHEN 'n' THEN left(q, -1)::numeric * 0.000000001 WHEN 'u' THEN left(q, -1)::numeric * 0.000001
        WHEN 'm' THEN left(q, -1)::numeric * 0.001 WHEN 'k' THEN left(q, -1)::numeric * 1000
        WHEN 'M' THEN left(q, -1)::numeric * 1000000 WHEN 'G' THEN left(q, -1)::numeric * 1000000000
        WHEN 'T' THEN left(q, -1)::numeric * 1000000000000 WHEN 'P' THEN left(q, -1)::numeric * 1000000000000000
        WHEN 'Ki' THEN left(q, -2)::numeric * 1024 WHEN 'Mi' THEN left(q, -2)::numeric * 1048576
        WHEN 'Gi' THEN left(q, -2)::numeric * 1073741824 WHEN 'Ti' THEN left(q, -2)::numeric * 1099511627776
        WHEN 'Pi' THEN left(q, -2)::numeric * 1125899906842624 WHEN 'Ei' THEN left(q, -2)::numeric * 1152921504606846976
        -- E: the exa suffix ("2E"), or an exponent ("2E3"), as e is
        WHEN 'E' THEN CASE WHEN right(q, 1) = 'E' THEN left(q, -1)::numeric * 1000000000000000000 ELSE q::numeric END
        ELSE q::numeric END) END
$$;
