-- Node metrics history partitioned by time (one partition per UTC hour), so
-- retention drops whole partitions instead of deleting rows, and reported
-- usage instead of stamped usage (see docs/registry.md, "Node usage").
--
-- Existing samples are kept without copying: the old table becomes the
-- partition of everything observed up to the end of the hour of its newest
-- sample, and is dropped like any other partition once that hour is older
-- than the retention.

DROP INDEX IF EXISTS cluster_node_metrics_observed_at_idx;
ALTER TABLE cluster_node_metrics RENAME TO cluster_node_metrics_before_004;
ALTER INDEX cluster_node_metrics_cluster_id_node_observed_at_key RENAME TO cluster_node_metrics_before_004_key;

CREATE TABLE cluster_node_metrics (
    cluster_id          text COLLATE "C" NOT NULL,
    node                text COLLATE "C" NOT NULL,
    cpu_usage_nanocores bigint           NOT NULL,
    memory_usage_bytes  bigint           NOT NULL,
    observed_at         timestamptz      NOT NULL,
    window_seconds      double precision NOT NULL DEFAULT 0,
    UNIQUE (cluster_id, node, observed_at)
) PARTITION BY RANGE (observed_at);

-- Its bound is the hour after its newest sample; an empty one is dropped.
DO $$
DECLARE
    newest timestamptz := (SELECT max(observed_at) FROM cluster_node_metrics_before_004);
BEGIN
    IF newest IS NULL THEN
        DROP TABLE cluster_node_metrics_before_004;
    ELSE
        EXECUTE format('ALTER TABLE cluster_node_metrics ATTACH PARTITION cluster_node_metrics_before_004 FOR VALUES FROM (MINVALUE) TO (%L)',
            date_trunc('hour', newest AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 hour');
    END IF;
END $$;

-- cluster_node_metrics_partition_name names the hourly partition starting at
-- hour_start (a UTC hour boundary): cluster_node_metrics_pYYYYMMDDHH.
CREATE FUNCTION cluster_node_metrics_partition_name(hour_start timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'cluster_node_metrics_p' || to_char(hour_start AT TIME ZONE 'UTC', 'YYYYMMDDHH24')
$$;

-- cluster_node_metrics_ensure_partitions creates the hourly partitions that
-- cover [from_ts, to_ts] and do not exist yet, and returns how many it
-- created. Hours already covered by another partition (the pre-004 one) are
-- skipped. Creation takes an advisory lock so concurrent callers do not race;
-- callers that find every partition in place take no lock.
CREATE FUNCTION cluster_node_metrics_ensure_partitions(from_ts timestamptz, to_ts timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
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

-- cluster_node_metrics_partitions lists the partitions with their upper
-- bound (exclusive), read from the catalog.
CREATE FUNCTION cluster_node_metrics_partitions() RETURNS TABLE (name text, upper_bound timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT c.relname::text,
        substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([^'']+)''\)')::timestamptz
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'cluster_node_metrics'::regclass
$$;

-- cluster_node_metrics_covered_until is the upper bound of the pre-004
-- partition (which starts at MINVALUE), or -infinity once it is dropped.
CREATE FUNCTION cluster_node_metrics_covered_until() RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT coalesce(max(upper_bound), '-infinity') FROM cluster_node_metrics_partitions()
    WHERE name = 'cluster_node_metrics_before_004'
$$;

-- cluster_node_usage_phase is a node's offset, in seconds (millisecond
-- steps), into its usage report period: a node's reported usage is refreshed
-- when a sample falls into a later period than the reported one, and periods
-- start at each node's own phase, so the refreshes of a quiet fleet spread
-- over the period instead of coming due together (docs/registry.md).
CREATE FUNCTION cluster_node_usage_phase(cluster_id text, name text, period_seconds float8) RETURNS numeric
LANGUAGE sql IMMUTABLE AS $$
    SELECT ((hashtext(cluster_id || '/' || name)::int8 + 2147483648) % greatest(round(period_seconds * 1000)::int8, 1)) / 1000.0
$$;
