-- Relist: keys of member $1's ResourceQuotas not in $2, a JSON array of
-- {"namespace", "name"} (keyRow); an EXCEPT, as apply_absent_pods.
SELECT namespace, name FROM cluster_resource_quota WHERE cluster_id = $1
EXCEPT
SELECT namespace, name FROM jsonb_to_recordset($2::jsonb) AS k(namespace text COLLATE "C", name text COLLATE "C")
