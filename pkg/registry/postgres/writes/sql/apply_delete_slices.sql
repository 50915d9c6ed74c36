-- Deletes member $1's ResourceSlices named in $2 and returns the nodes whose
-- device counts change: each deleted slice's, and those with a slice of a
-- pool that lost one (its newest generation may now be an older one).
WITH gone AS (
	DELETE FROM cluster_resource_slice s WHERE s.cluster_id = $1 AND s.name = ANY($2::text[])
	RETURNING s.node_name, s.driver, s.pool
)
SELECT node_name FROM gone WHERE node_name IS NOT NULL
UNION SELECT s.node_name FROM (SELECT DISTINCT driver, pool FROM gone) p JOIN cluster_resource_slice s
	ON s.cluster_id = $1 AND s.driver = p.driver AND s.pool = p.pool
	WHERE s.node_name IS NOT NULL
