-- Back to 022: one sequence hands out every resourceVersion, from above
-- every version a ticket stamped.
CREATE SEQUENCE registry_resource_version AS bigint;
SELECT setval('registry_resource_version', greatest((SELECT resource_version FROM registry_state),
    (SELECT last_value FROM registry_ticket) << 22) + (1 << 22));

DO $$
DECLARE
    f oid;
BEGIN
    FOR f IN SELECT p.oid FROM pg_proc p
            WHERE p.pronamespace = current_schema()::regnamespace AND p.prosrc LIKE '%registry_next_rv()%'
                AND p.proname <> 'registry_next_rv' LOOP
        EXECUTE replace(pg_get_functiondef(f), 'registry_next_rv()', 'nextval(''registry_resource_version'')');
    END LOOP;
END $$;

DROP FUNCTION registry_wait_tickets(bigint);
DROP FUNCTION registry_next_rv();
DROP FUNCTION registry_take_ticket();
DROP SEQUENCE registry_ticket;
