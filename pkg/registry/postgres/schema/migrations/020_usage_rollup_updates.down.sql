-- Back to 010's merge and the default fill factor.
CREATE OR REPLACE FUNCTION usage_histogram_add(a_buckets smallint[], a_counts bigint[], b_buckets smallint[], b_counts bigint[],
    OUT buckets smallint[], OUT counts bigint[])
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_agg(b ORDER BY b), array_agg(n ORDER BY b) FROM (
        SELECT b, sum(n)::bigint AS n FROM (
            SELECT * FROM unnest(a_buckets, a_counts) AS x(b, n)
            UNION ALL
            SELECT * FROM unnest(b_buckets, b_counts) AS y(b, n)
        ) z GROUP BY b
    ) s
$$;

ALTER TABLE cluster_node_usage_hourly RESET (fillfactor);
ALTER TABLE cluster_namespace_usage_hourly RESET (fillfactor);
