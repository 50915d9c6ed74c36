-- Publishes the highest resourceVersion the transaction took, at the end of
-- the views section (write.go): $1, the highest the store's statements
-- returned, or a higher one the triggers stamped (the ClusterCapacity rows
-- of migration 009), which the change log holds above the start version —
-- registry_state's value until this statement.
UPDATE registry_state SET resource_version = greatest($1::bigint,
	(SELECT max(c.resource_version) FROM registry_change c WHERE c.resource_version > registry_state.resource_version))
