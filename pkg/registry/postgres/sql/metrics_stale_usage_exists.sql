-- Whether any node's or namespace's reported usage is no longer confirmed
-- since $1 (metrics_usage_stale).
WITH {{metrics_usage_stale}}
SELECT EXISTS (SELECT 1 FROM stale_nodes) OR EXISTS (SELECT 1 FROM stale_namespaces)
