DROP TABLE cluster_node_usage_buckets;
DROP TABLE cluster_node_usage_hourly;
DROP FUNCTION usage_bucket(bigint);
