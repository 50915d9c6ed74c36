-- Writers commit in ticket order (docs/registry.md, "Commits in ticket
-- order"): a writer's views section no longer holds the one writer lock.
-- It takes a ticket t, stamps versions t × 2^22 + n (n counting up from 1
-- in the transaction), and before it publishes waits for every earlier
-- ticket's transaction to end, so transactions commit in version order and
-- every snapshot still holds a prefix of the versions.
--
-- Advisory locks of class 1953063787 ("tick", TicketClass in write.go):
-- (class, t mod 2^31) is held by ticket t's transaction, exclusively by its
-- owner and shared by the later tickets that waited for it; (class, -1) is
-- the barrier every ticket holder shares and a failover takes alone.

CREATE SEQUENCE registry_ticket AS bigint;
SELECT setval('registry_ticket', (greatest((SELECT resource_version FROM registry_state),
    (SELECT last_value FROM registry_resource_version)) >> 22) + 1);

-- The transaction's ticket, taken on the first call: returns t × 2^22, the
-- version every one this transaction stamps lies above. Taking the number
-- and locking it is made atomic by a check: once the lock is held, a later
-- ticket that already published (it took the lock shared before this one
-- and so did not wait for it) sends this writer to a new ticket.
CREATE FUNCTION registry_take_ticket() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
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

-- The transaction's next resourceVersion, in place of nextval of the old
-- sequence. Plain SQL so it is inlined: about 1 µs a row where a PL/pgSQL
-- function costs 6. A writer that stamped 2^22 or more versions fails at
-- publish (registry_wait_tickets).
CREATE FUNCTION registry_next_rv() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT set_config('registry.next_rv',
        (coalesce(nullif(current_setting('registry.next_rv', true), '')::bigint, registry_take_ticket() + 1) + 1)::text,
        true)::bigint - 1
$$;

-- Waits for every ticket between the last published one and this
-- transaction's to end, unless the transaction's ticket is at most $1
-- tickets past the published one, and says whether it waited: a shared
-- lock on each, granted at once for one that ended or was never locked (its
-- owner then finds this transaction's publish and takes a new ticket).
-- Writers that stamped versions wait always ($1 = 0); one that stamped
-- nothing only when the tickets no one published pile up (write.go), so
-- the next waits take few locks. Fails if the transaction stamped more
-- versions than its ticket holds.
CREATE FUNCTION registry_wait_tickets(lag bigint) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    t         bigint := current_setting('registry.ticket')::bigint;
    published bigint := (SELECT resource_version FROM registry_state) >> 22;
BEGIN
    IF current_setting('registry.next_rv')::bigint > (t + 1) << 22 THEN
        RAISE EXCEPTION 'a transaction stamped more than 4194303 resourceVersions (ticket %)', t;
    END IF;
    IF t - published <= lag THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(1953063787, (i % 2147483648)::int) FROM generate_series(published + 1, t - 1) i;
    RETURN true;
END $$;

-- Every function that took versions from the old sequence (the change-log
-- and ClusterCapacity triggers) takes them from the ticket instead.
DO $$
DECLARE
    f oid;
BEGIN
    FOR f IN SELECT p.oid FROM pg_proc p
            WHERE p.pronamespace = current_schema()::regnamespace AND p.prosrc LIKE '%nextval(''registry_resource_version'')%' LOOP
        EXECUTE replace(pg_get_functiondef(f), 'nextval(''registry_resource_version'')', 'registry_next_rv()');
    END LOOP;
END $$;

DROP SEQUENCE registry_resource_version;
