-- registry_notify wakes listeners when a writer publishes a new registry
-- version; NOTIFY is delivered at commit, and not at all on rollback.
CREATE OR REPLACE FUNCTION registry_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('registry_change', NEW.resource_version::text);
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER registry_state_notify AFTER UPDATE ON registry_state
    FOR EACH ROW WHEN (NEW.resource_version <> OLD.resource_version) EXECUTE FUNCTION registry_notify();
