-- A writer waits only for the earlier tickets still in flight (issue 50;
-- docs/registry.md, "Commits in ticket order"). Migration 023's wait took a
-- shared lock on every ticket between the published one and its own, so
-- each ticket taken by a transaction that then aborted cost the next
-- writer a lock: after 100,000 of them every commit failed with "out of
-- shared memory", until a commit got through, and none could.
--
-- With at most 64 tickets in between the wait still locks each, as 023
-- did: a lock costs under 1 µs, a read of pg_locks copies the server's
-- whole lock table (65 µs on an idle server, 2.5-3 ms with 6,000 locks
-- held), so the common case pays nothing new. Past 64 it reads pg_locks
-- and takes one shared lock per earlier ticket still in flight, however
-- many tickets were taken in between.
--
-- registry_take_ticket is unchanged: a taker shares the barrier
-- (1953063787, -1) from before its nextval to its end, then locks its
-- ticket exclusively ((1953063787, t mod 2^31)), and takes a new ticket if
-- a later one published first (its lock was taken shared before the
-- taker's, by a wait that locks every ticket in between). A ticket the
-- wait does not see locked may be about to be: its taker did its nextval
-- before this writer's and has not asked for the lock yet. So the wait
-- also looks at the barrier:
--
-- 1. One read of pg_locks (one snapshot of the lock table) gives, for
--    every other transaction of this database, whether it shares the
--    barrier and the ticket locks it holds or waits for. Tickets are told
--    from their keys (t mod 2^31) as the one of that key within 2^30 of
--    this writer's ticket: every ticket of a transaction in flight is, as
--    long as fewer than 2^30 tickets (aborted or not) are taken while one
--    transaction holds its ticket.
-- 2. A transaction's tickets are taken in increasing order, so its highest
--    is the one it holds or waits for last. For a transaction that shared
--    the barrier at the first read (any other took its barrier, and so
--    its nextval, after this writer's nextval: its tickets are higher),
--    against the published ticket as of this read:
--    - highest ticket between the published one and this writer's: take
--      a shared lock on it. Held, that waits for the transaction's end;
--      only asked for (it queues behind a shared lock of a wait that locks
--      every ticket in between), either this writer gets it first, and the
--      taker, once it has its lock, finds this writer's publish and takes
--      a new ticket, or the taker gets it first and this writer waits for
--      its end.
--    - highest above this writer's: every later ticket of it is higher.
--    - none, or a held one at or below the published one: it is between
--      its barrier and the lock of the ticket it took (a first one, or a
--      new one since a later ticket published first), or it committed and
--      is releasing its locks. Sleep a millisecond and read pg_locks
--      again. Those windows are a few statements without a lock wait
--      (a taker taking a new ticket already holds its locks on
--      registry_state and registry_ticket), but one: a first nextval
--      waits for the sequence's lock while DDL holds or waits for it (a
--      migration), and that DDL may wait for this writer. A taker seen
--      waiting for that lock has not taken its number yet, so its ticket
--      will be higher: it is left alone. (Not recognized: a taker stuck
--      there on a system catalog's lock, behind a VACUUM FULL of the
--      catalog that waits for this writer; the writer's statement_timeout
--      ends that.)
--    - asked for, at or below the published one: once it has that lock
--      its taker finds the publish and takes a new, higher ticket.
-- 3. Then the shared locks, one per transaction in flight that holds (or
--    is about to hold) an earlier ticket.
--
-- Compatible (docs/upgrades.md): registry_wait_tickets lives in the
-- database, so a release from before this migration waits the new way
-- too, and registry_take_ticket is unchanged. Waits still running 023's
-- definition while this migration commits mix with this one as its
-- short-range waits do: their shared locks on tickets nobody locked yet
-- make such a ticket's taker wait for their end, as before, and this wait
-- sees that taker asking for its ticket's lock.
CREATE OR REPLACE FUNCTION registry_wait_tickets(lag bigint) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    t         bigint := current_setting('registry.ticket')::bigint;
    published bigint := (SELECT resource_version FROM registry_state) >> 22;
    db        oid := (SELECT oid FROM pg_database WHERE datname = current_database());
    seq       oid := 'registry_ticket'::regclass;
    takers    text[];
    unsettled boolean;
    keys      int[];
BEGIN
    IF current_setting('registry.next_rv')::bigint > (t + 1) << 22 THEN
        RAISE EXCEPTION 'a transaction stamped more than 4194303 resourceVersions (ticket %)', t;
    END IF;
    IF t - published <= lag THEN
        RETURN false;
    END IF;
    IF t - published <= 65 THEN
        PERFORM pg_advisory_xact_lock_shared(1953063787, (i % 2147483648)::int) FROM generate_series(published + 1, t - 1) i;
        RETURN true;
    END IF;
    LOOP
        published := (SELECT resource_version FROM registry_state) >> 22;
        WITH l AS (
            SELECT l.virtualtransaction AS vx, l.locktype = 'relation' AS queued, l.granted,
                   l.locktype = 'advisory' AND l.objid::bigint = 4294967295 AS barrier,
                   CASE WHEN l.locktype = 'advisory' AND l.objid::bigint < 2147483648 THEN
                       t + 1073741824 - (((t + 1073741824 - l.objid::bigint) % 2147483648) + 2147483648) % 2147483648
                   END AS ticket
              FROM pg_locks l
             WHERE l.database = db AND l.pid IS DISTINCT FROM pg_backend_pid()
               AND (l.locktype = 'advisory' AND l.classid = 1953063787 AND l.objsubid = 2
                       AND (l.objid::bigint = 4294967295 AND l.mode = 'ShareLock' AND l.granted
                            OR l.objid::bigint < 2147483648 AND l.mode = 'ExclusiveLock')
                    OR l.locktype = 'relation' AND l.relation = seq AND NOT l.granted)
        ), x AS (
            SELECT vx, bool_or(barrier) AS barrier, bool_or(queued) AS queued, max(ticket) AS ticket,
                   (array_agg(granted ORDER BY ticket DESC) FILTER (WHERE ticket IS NOT NULL))[1] AS granted
              FROM l GROUP BY vx
        )
        SELECT coalesce(takers, array_agg(vx) FILTER (WHERE barrier), '{}'),
               coalesce(bool_or((vx = ANY(takers) OR takers IS NULL AND barrier)
                   AND (ticket IS NULL AND NOT queued OR ticket <= published AND granted)), false),
               array_agg((ticket % 2147483648)::int) FILTER (WHERE ticket > published AND ticket < t)
          INTO takers, unsettled, keys
          FROM x;
        EXIT WHEN NOT unsettled;
        PERFORM pg_sleep(0.001);
    END LOOP;
    PERFORM pg_advisory_xact_lock_shared(1953063787, k) FROM unnest(keys) k;
    RETURN true;
END $$;
