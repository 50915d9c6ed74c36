-- registry:no-transaction
-- A watch's history read filtered by member (a cluster label selector) reads
-- that member's entries of its kind and no others (issue 54): before this
-- index it walked every entry of the retained log from its version, so a
-- resume naming a member the registry does not hold read the whole hour.
-- Built CONCURRENTLY, beside the writers, instead of locking the change log
-- (and with it every commit) for the build: hence no transaction. An
-- interrupted build leaves the index INVALID; running the migration again
-- drops it and builds it anew.
DROP INDEX CONCURRENTLY IF EXISTS registry_change_kind_cluster_idx;
CREATE INDEX CONCURRENTLY registry_change_kind_cluster_idx ON registry_change (kind, cluster_id, resource_version);
