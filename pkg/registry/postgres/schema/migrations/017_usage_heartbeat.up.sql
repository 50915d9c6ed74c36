-- Quiet means quiet (issue 25): a node's or namespace's reported usage
-- changes only when it moves past the threshold or becomes unknown, and the
-- member's usage heartbeat is recorded once, on its ClusterCapacity: when
-- the newest node metrics sample recorded of it was taken, with a minute's
-- resolution (RecordMemberState), so it costs the member one version a
-- minute instead of one per node per report period.
ALTER TABLE cluster_capacity ADD COLUMN usage_observed_at timestamptz;

-- Maintenance finds the reported usage of members without a recent
-- heartbeat through these (metrics_expire_usage.sql), reading only the rows
-- that still have a usage.
CREATE INDEX cluster_node_usage_observed_idx ON cluster_node (cluster_id, usage_observed_at) WHERE usage_observed_at IS NOT NULL;
CREATE INDEX cluster_namespace_usage_observed_idx ON cluster_namespace (cluster_id, usage_observed_at) WHERE usage_observed_at IS NOT NULL;
