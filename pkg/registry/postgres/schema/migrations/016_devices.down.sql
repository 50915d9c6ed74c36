DROP FUNCTION registry_current_slices(text);
ALTER TABLE cluster_capacity
    DROP COLUMN devices_total, DROP COLUMN devices_allocated, DROP COLUMN devices_nodes, DROP COLUMN member_apis;
ALTER TABLE cluster_namespace DROP COLUMN device_claims;
ALTER TABLE cluster_node DROP COLUMN devices_total, DROP COLUMN devices_allocated;
DROP TABLE cluster_claim_device;
DROP TABLE cluster_resource_claim;
DROP TABLE cluster_resource_slice;
DELETE FROM discovery_cursor WHERE resource IN ('resourceslices', 'resourceclaims');
