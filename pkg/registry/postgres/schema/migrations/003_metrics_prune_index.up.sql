-- Pruning deletes samples older than the retention: find them by time
-- instead of scanning a day of history per scrape.
CREATE INDEX cluster_node_metrics_observed_at_idx ON cluster_node_metrics (observed_at);
