-- cluster_node_usage_phase is a node's offset, in seconds (millisecond
-- steps), into its usage report period: a node's reported usage is refreshed
-- when a sample falls into a later period than the reported one, and periods
-- start at each node's own phase, so the refreshes of a quiet fleet spread
-- over the period instead of coming due together (docs/registry.md).
CREATE OR REPLACE FUNCTION cluster_node_usage_phase(cluster_id text, name text, period_seconds double precision) RETURNS numeric LANGUAGE sql IMMUTABLE AS $$
    SELECT ((hashtext(cluster_id || '/' || name)::int8 + 2147483648) % greatest(round(period_seconds * 1000)::int8, 1)) / 1000.0
$$;
