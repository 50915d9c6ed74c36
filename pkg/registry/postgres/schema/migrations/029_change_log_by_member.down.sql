-- registry:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS registry_change_kind_cluster_idx;
