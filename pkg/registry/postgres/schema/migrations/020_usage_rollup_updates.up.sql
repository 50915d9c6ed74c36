-- The hourly usage rollups take a sample a row at every scrape (a node's
-- row every 30 s, a namespace's at every report), and that update was most
-- of a quiet scrape's cost (issue 25: 75 % of recording a 5,000-node
-- scrape, half of it the histogram merge):
--
-- usage_histogram_add merges one sample's histogram (one bucket) into a
-- row's without a query: the bucket's count is raised in place, or the
-- bucket inserted in order. Other histograms (a member's row, a scrape of
-- several samples of one node) merge as before. Same results: the arrays
-- stay ascending and a bucket's counts summed.
CREATE OR REPLACE FUNCTION usage_histogram_add(a_buckets smallint[], a_counts bigint[], b_buckets smallint[], b_counts bigint[],
    OUT buckets smallint[], OUT counts bigint[])
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
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

-- Room in each page for a row's next version, so the update is a
-- heap-only tuple (no new index entries) and pruned in place: the rows
-- change columns no index holds. Pages written from now on keep it.
ALTER TABLE cluster_node_usage_hourly SET (fillfactor = 70);
ALTER TABLE cluster_namespace_usage_hourly SET (fillfactor = 70);
