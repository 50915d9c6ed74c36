-- registry_take_ticket is the transaction's commit ticket (docs/registry.md,
-- "Commits in ticket order"), taken on the first call: it returns t × 2^22,
-- the version every one this transaction stamps lies above. Advisory locks
-- of class 1953063787 ("tick", TicketClass in write.go): the taker shares
-- the barrier (class, -1), which a failover takes alone, until its end, and
-- holds (class, t mod 2^31) exclusively; later tickets that wait for it
-- share that one. Taking the number and locking it is made atomic by a
-- check: once the lock is held, a later ticket that already published (it
-- took the lock shared before this one and so did not wait for it) sends
-- this writer to a new ticket.
CREATE OR REPLACE FUNCTION registry_take_ticket() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    t bigint := nullif(current_setting('registry.ticket', true), '')::bigint;
BEGIN
    IF t IS NOT NULL THEN
        RETURN t << 22;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(1953063787, -1);
    LOOP
        t := nextval('registry_ticket');
        PERFORM pg_advisory_xact_lock(1953063787, (t % 2147483648)::int);
        EXIT WHEN (SELECT resource_version FROM registry_state) < t << 22;
    END LOOP;
    PERFORM set_config('registry.ticket', t::text, true);
    PERFORM set_config('registry.next_rv', ((t << 22) + 1)::text, true);
    RETURN t << 22;
END $$;
