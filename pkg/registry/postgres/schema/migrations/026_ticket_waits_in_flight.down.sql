-- Back to 023's wait: a shared lock on every ticket between the published
-- one and this transaction's.
-- Waits for every ticket between the last published one and this
-- transaction's to end, unless the transaction's ticket is at most $1
-- tickets past the published one, and says whether it waited: a shared
-- lock on each, granted at once for one that ended or was never locked (its
-- owner then finds this transaction's publish and takes a new ticket).
-- Writers that stamped versions wait always ($1 = 0); one that stamped
-- nothing only when the tickets no one published pile up (write.go), so
-- the next waits take few locks. Fails if the transaction stamped more
-- versions than its ticket holds.
CREATE OR REPLACE FUNCTION registry_wait_tickets(lag bigint) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
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
