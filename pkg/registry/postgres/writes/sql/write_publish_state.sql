-- Publishes the highest resourceVersion the transaction took, after the
-- earlier tickets' transactions ended (write.go): $1, the highest the
-- store's statements returned, or a higher one the triggers stamped (the
-- ClusterCapacity rows of migration 009), which the change log holds above
-- $2, the ticket's base; at least the base, so later writers' waits start
-- past this ticket. Never lowers the state (a failover may have raised it,
-- see replicas/failover.go).
UPDATE registry_state SET resource_version = greatest(resource_version, $1::bigint, $2::bigint,
	(SELECT max(c.resource_version) FROM registry_change c WHERE c.resource_version > $2::bigint))
