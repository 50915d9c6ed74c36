-- The ClusterCapacity sums keep their plans (issue 25): every statement
-- that writes node or namespace rows runs cluster_capacity_add_nodes or
-- cluster_capacity_add_namespaces once, from its sum trigger. As SQL
-- functions they were planned again at every call: about 4 ms of a usage
-- report's UPDATE of one node row (6.4 of 2.7 ms with the plan kept) and
-- of one of 125 rows (about 21 of 17.5 ms), on an idle database of 100,000
-- nodes. As PL/pgSQL functions they keep the plan of their one statement
-- for the connection; it is generic from the first call (the planner
-- priced a generic plan far above a custom one, so PL/pgSQL would have
-- planned every call anew). Same statements, same results.
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
