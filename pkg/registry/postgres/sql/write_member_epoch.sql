-- The ownership epoch of member $1, 0 for a member nobody claimed.
SELECT coalesce((SELECT epoch FROM discovery_member WHERE cluster_id = $1), 0)
