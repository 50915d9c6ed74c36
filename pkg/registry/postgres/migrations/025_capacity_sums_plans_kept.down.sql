-- Back to SQL functions, planned at every call (cluster_capacity_add_nodes
-- without JIT, as migration 015 made it).
DO $$
DECLARE
    f regprocedure;
    body text;
BEGIN
    FOREACH f IN ARRAY ARRAY['cluster_capacity_add_nodes(cluster_node[], cluster_node[])'::regprocedure,
            'cluster_capacity_add_namespaces(cluster_namespace[], cluster_namespace[])'::regprocedure] LOOP
        body := (SELECT prosrc FROM pg_proc WHERE oid = f);
        body := regexp_replace(regexp_replace(body, E'^BEGIN\n', ''), E';\nEND$', E'\n');
        EXECUTE format('CREATE OR REPLACE FUNCTION %s(%s) RETURNS void LANGUAGE sql %s AS %L',
            f::oid::regproc, pg_get_function_arguments(f),
            CASE WHEN f = 'cluster_capacity_add_nodes(cluster_node[], cluster_node[])'::regprocedure THEN 'SET jit = off' ELSE '' END,
            body);
    END LOOP;
END $$;
