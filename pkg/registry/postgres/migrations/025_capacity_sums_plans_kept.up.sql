-- The ClusterCapacity sums keep their plans (issue 25): every statement
-- that writes node or namespace rows runs cluster_capacity_add_nodes or
-- cluster_capacity_add_namespaces once, from its sum trigger. As SQL
-- functions they were planned again at every call: on an idle database of
-- 100,000 nodes, an UPDATE of one node row's usage took 6.4-8.5 ms and
-- 2.7 ms with the plan kept, one of 125 rows about 21 and 17.5 ms. As
-- PL/pgSQL functions they keep the plan of their one statement for the
-- connection, generic from the first call: the planner prices the
-- generic plan far above a custom one, so without plan_cache_mode
-- PL/pgSQL would plan every call anew too. Same statements, same results.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOREACH f IN ARRAY ARRAY['cluster_capacity_add_nodes(cluster_node[], cluster_node[])'::regprocedure,
            'cluster_capacity_add_namespaces(cluster_namespace[], cluster_namespace[])'::regprocedure] LOOP
        EXECUTE format('CREATE OR REPLACE FUNCTION %s(%s) RETURNS void LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_generic_plan AS %L',
            f::oid::regproc, pg_get_function_arguments(f),
            E'BEGIN\n' || rtrim((SELECT prosrc FROM pg_proc WHERE oid = f), E' \n;') || E';\nEND');
    END LOOP;
END $$;
