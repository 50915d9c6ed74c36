-- The ownership epoch of member $1, 0 for a member nobody claimed, and the
-- registry's failover count.
SELECT coalesce((SELECT epoch FROM discovery_member WHERE cluster_id = $1), 0), (SELECT failovers FROM registry_epoch LIMIT 1)
