-- Relist: names of member $1's namespaces not in $2 (text[]); an EXCEPT, as
-- apply_absent_pods (not NOT (name = ANY(...)), which compares every row
-- with every name).
SELECT name FROM cluster_namespace WHERE cluster_id = $1
EXCEPT
SELECT k.name COLLATE "C" FROM unnest($2::text[]) AS k(name)
