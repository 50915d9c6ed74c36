-- The least write protocol the registry accepts from a publishing replica
-- (migration 028).
SELECT write_protocol FROM registry_state
