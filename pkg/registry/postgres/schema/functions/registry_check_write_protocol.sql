-- registry_check_write_protocol refuses an update of registry_state (every
-- publish, a failover's floor) from a session that speaks a lower write
-- protocol than registry_state.write_protocol (docs/upgrades.md, "The write
-- protocol"). A session says its protocol in the run-time parameter
-- registry.write_protocol (WriteProtocol in schema/migrate.go); a release from before
-- migration 028 says none, 0.
CREATE OR REPLACE FUNCTION registry_check_write_protocol() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE OR REPLACE TRIGGER registry_state_write_protocol BEFORE UPDATE ON registry_state
    FOR EACH ROW EXECUTE FUNCTION registry_check_write_protocol();
