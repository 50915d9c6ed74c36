-- Mixed versions are safe or refused (issue 50; docs/upgrades.md): the
-- write protocol a replica speaks is checked in the same transaction as
-- every publish. Each connection of a replica says which protocol it
-- writes (the run-time parameter registry.write_protocol, WriteProtocol in
-- write.go; a release from before this migration says none, 0), and
-- registry_state.write_protocol is the least the registry accepts: an
-- update of registry_state (every publish, a failover's floor) from a
-- session below it fails with an error naming both and what to do. A
-- migration that changes how writers must commit raises it in the same
-- transaction as its change, so the replicas of the previous release can
-- no longer publish out of order; they read on, and leave readiness once
-- they know this check (Store.Ready). 0 here: every release since
-- migration 023 commits correctly with the functions this registry holds.
ALTER TABLE registry_state ADD COLUMN write_protocol int NOT NULL DEFAULT 0;

CREATE FUNCTION registry_check_write_protocol() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    spoken int := coalesce(nullif(current_setting('registry.write_protocol', true), '')::int, 0);
BEGIN
    IF spoken < NEW.write_protocol THEN
        RAISE EXCEPTION 'this replica writes registry protocol %, the registry requires % or later', spoken, NEW.write_protocol
            USING ERRCODE = 'PR001',
                  HINT = 'upgrade the replica to a release that speaks it; replicas of an older release may not write beside it (docs/upgrades.md)';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER registry_state_write_protocol BEFORE UPDATE ON registry_state
    FOR EACH ROW EXECUTE FUNCTION registry_check_write_protocol();
