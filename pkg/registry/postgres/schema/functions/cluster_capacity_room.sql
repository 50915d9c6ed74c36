-- cluster_capacity_room says whether a member has room for a pod.
CREATE OR REPLACE FUNCTION cluster_capacity_room(free_cpu numeric, free_memory numeric) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(free_cpu > 0 AND free_memory > 0, false)
$$;
