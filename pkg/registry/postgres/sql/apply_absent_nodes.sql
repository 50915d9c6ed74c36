-- Relist: names of member $1's nodes not in $2 (text[]); an anti-join, as
-- apply_absent_namespaces.
SELECT r.name FROM cluster_node r
WHERE r.cluster_id = $1 AND NOT EXISTS (SELECT 1 FROM unnest($2::text[]) AS k(name) WHERE k.name = r.name)
