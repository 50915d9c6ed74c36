-- Relist: keys of member $1's pods not in $2, a JSON array of
-- {"namespace", "name"} (keyRow). An EXCEPT, planned as one hash (or sort)
-- of both sides whatever the statistics say: an anti-join is planned as a
-- nested loop when the member's rows are missing from the statistics (a
-- member new since the last ANALYZE), quadratic in a relist of thousands.
SELECT namespace, name FROM cluster_pod WHERE cluster_id = $1
EXCEPT
SELECT namespace, name FROM jsonb_to_recordset($2::jsonb) AS k(namespace text COLLATE "C", name text COLLATE "C")
