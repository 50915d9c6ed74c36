-- A NoSchedule or NoExecute taint, as cluster_node.schedulable counts them.
CREATE OR REPLACE FUNCTION cluster_node_tainted(taints jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_path_exists(taints, '$[*] ? (@.effect == "NoSchedule" || @.effect == "NoExecute")')
$$;
