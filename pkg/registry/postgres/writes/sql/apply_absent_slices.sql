-- Relist: names of member $1's ResourceSlices not in $2 (text[]); an
-- EXCEPT, as apply_absent_pods.
SELECT name FROM cluster_resource_slice WHERE cluster_id = $1
EXCEPT
SELECT k.name COLLATE "C" FROM unnest($2::text[]) AS k(name)
