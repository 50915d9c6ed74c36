-- registry_current_slices are member m's slices of each pool's newest
-- generation, the ones that count.
CREATE OR REPLACE FUNCTION registry_current_slices(m text) RETURNS SETOF cluster_resource_slice LANGUAGE sql STABLE AS $$
    SELECT s.* FROM cluster_resource_slice s
    WHERE s.cluster_id = m AND s.pool_generation = (
        SELECT max(p.pool_generation) FROM cluster_resource_slice p
        WHERE p.cluster_id = s.cluster_id AND p.driver = s.driver AND p.pool = s.pool)
$$;
