-- After a DELETE of view rows: the highest version the change-log trigger
-- gave a tombstone in this transaction ($1, the writer's start version).
SELECT coalesce(max(resource_version), 0) FROM registry_change WHERE resource_version > $1
