ALTER TABLE cluster_node DROP COLUMN unschedulable_reason;
