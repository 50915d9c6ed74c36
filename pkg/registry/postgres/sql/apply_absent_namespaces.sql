-- Relist: names of member $1's namespaces not in $2 (text[]). An anti-join,
-- not NOT (name = ANY(...)), which compares every row with every name:
-- quadratic in a relist of thousands.
SELECT r.name FROM cluster_namespace r
WHERE r.cluster_id = $1 AND NOT EXISTS (SELECT 1 FROM unnest($2::text[]) AS k(name) WHERE k.name = r.name)
