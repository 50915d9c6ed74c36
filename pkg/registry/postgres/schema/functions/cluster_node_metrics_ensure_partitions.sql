-- cluster_node_metrics_ensure_partitions creates the hourly partitions that
-- cover [from_ts, to_ts] and do not exist yet, and returns how many it
-- created. Hours already covered by another partition (the pre-004 one) are
-- skipped. Creation takes an advisory lock so concurrent callers do not race;
-- callers that find every partition in place take no lock.
CREATE OR REPLACE FUNCTION cluster_node_metrics_ensure_partitions(from_ts timestamp with time zone, to_ts timestamp with time zone) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    h       timestamptz := date_trunc('hour', from_ts AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    last_h  timestamptz := date_trunc('hour', to_ts AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    locked  boolean := false;
    created integer := 0;
BEGIN
    WHILE h <= last_h LOOP
        IF to_regclass(cluster_node_metrics_partition_name(h)) IS NULL
            AND h >= cluster_node_metrics_covered_until() THEN
            IF NOT locked THEN
                PERFORM pg_advisory_xact_lock(hashtext('cluster_node_metrics_partitions'));
                locked := true;
            END IF;
            -- The lock's holder before us may have created it; the catalog
            -- this statement sees can predate that, so creation tolerates it.
            BEGIN
                EXECUTE format('CREATE TABLE %I PARTITION OF cluster_node_metrics FOR VALUES FROM (%L) TO (%L)',
                    cluster_node_metrics_partition_name(h), h, h + interval '1 hour');
                created := created + 1;
            EXCEPTION WHEN duplicate_table OR unique_violation THEN
                NULL;
            END;
        END IF;
        h := h + interval '1 hour';
    END LOOP;
    RETURN created;
END $$;
