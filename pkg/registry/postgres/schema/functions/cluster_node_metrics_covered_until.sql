-- cluster_node_metrics_covered_until is the upper bound of the pre-004
-- partition (which starts at MINVALUE), or -infinity once it is dropped.
CREATE OR REPLACE FUNCTION cluster_node_metrics_covered_until() RETURNS timestamp with time zone LANGUAGE sql STABLE AS $$
    SELECT coalesce(max(upper_bound), '-infinity') FROM cluster_node_metrics_partitions()
    WHERE name = 'cluster_node_metrics_before_004'
$$;
