-- cluster_node_metrics_partition_name names the hourly partition starting at
-- hour_start (a UTC hour boundary): cluster_node_metrics_pYYYYMMDDHH.
CREATE OR REPLACE FUNCTION cluster_node_metrics_partition_name(hour_start timestamp with time zone) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'cluster_node_metrics_p' || to_char(hour_start AT TIME ZONE 'UTC', 'YYYYMMDDHH24')
$$;
