-- usage_histogram_add adds two sparse histograms (ascending buckets and
-- their counts). One sample's histogram (one bucket), which the hourly
-- rollups merge into a row at every scrape, is merged without a query: the
-- bucket's count raised in place, or the bucket inserted in order (issue
-- 25: the merge was half of recording a quiet 5,000-node scrape). Other
-- histograms (a member's row, several samples of one node) are summed by
-- bucket.
CREATE OR REPLACE FUNCTION usage_histogram_add(a_buckets smallint[], a_counts bigint[], b_buckets smallint[], b_counts bigint[], OUT buckets smallint[], OUT counts bigint[]) RETURNS record LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    b smallint;
    i int;
    n int := coalesce(cardinality(a_buckets), 0);
BEGIN
    IF cardinality(b_buckets) = 1 AND cardinality(b_counts) = 1 AND n = cardinality(a_counts) THEN
        b := b_buckets[1];
        i := 1;
        WHILE i <= n AND a_buckets[i] < b LOOP
            i := i + 1;
        END LOOP;
        IF i <= n AND a_buckets[i] = b THEN
            buckets := a_buckets;
            counts := a_counts;
            counts[i] := counts[i] + b_counts[1];
        ELSE
            buckets := a_buckets[1:i - 1] || b || a_buckets[i:n];
            counts := a_counts[1:i - 1] || b_counts[1] || a_counts[i:n];
        END IF;
        RETURN;
    END IF;
    SELECT array_agg(s.b ORDER BY s.b), array_agg(s.n ORDER BY s.b) INTO buckets, counts FROM (
        SELECT z.b, sum(z.n)::bigint AS n FROM (
            SELECT * FROM unnest(a_buckets, a_counts) AS x(b, n)
            UNION ALL
            SELECT * FROM unnest(b_buckets, b_counts) AS y(b, n)
        ) z GROUP BY z.b
    ) s;
END $$;
