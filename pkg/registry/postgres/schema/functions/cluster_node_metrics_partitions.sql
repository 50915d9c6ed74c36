-- cluster_node_metrics_partitions lists the partitions with their upper
-- bound (exclusive), read from the catalog.
CREATE OR REPLACE FUNCTION cluster_node_metrics_partitions() RETURNS TABLE(name text, upper_bound timestamp with time zone) LANGUAGE sql STABLE AS $$
    SELECT c.relname::text,
        substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([^'']+)''\)')::timestamptz
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'cluster_node_metrics'::regclass
$$;
