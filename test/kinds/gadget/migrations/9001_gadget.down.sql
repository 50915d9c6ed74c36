DROP TABLE test_gadget;
DROP FUNCTION registry_log_update_test_gadget();
ALTER TABLE registry_change DROP CONSTRAINT registry_change_kind_check,
    ADD CONSTRAINT registry_change_kind_check CHECK (kind IN ('NodeCapacity', 'ClusterNamespace', 'ClusterCapacity')) NOT VALID;
