ALTER TABLE cluster_capacity DROP COLUMN complete_as_of;
SELECT registry_define_log_update('cluster_capacity', 'ClusterCapacity');
