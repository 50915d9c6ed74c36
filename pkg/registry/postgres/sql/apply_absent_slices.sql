-- Relist: names of member $1's ResourceSlices not in $2.
SELECT name FROM cluster_resource_slice WHERE cluster_id = $1 AND NOT (name = ANY($2::text[]))
