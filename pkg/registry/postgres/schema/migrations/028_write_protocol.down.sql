DROP TRIGGER registry_state_write_protocol ON registry_state;
DROP FUNCTION registry_check_write_protocol();
ALTER TABLE registry_state DROP COLUMN write_protocol;
