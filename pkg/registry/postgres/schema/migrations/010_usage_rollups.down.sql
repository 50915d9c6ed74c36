DROP TABLE cluster_node_usage_hourly;
DROP FUNCTION usage_histogram_add(smallint[], bigint[], smallint[], bigint[]);
DROP FUNCTION usage_bucket(bigint);
