-- The writer's commit ticket (write.go, migration 023): its base, ticket ×
-- 2^22, above which every version the transaction stamps lies.
SELECT registry_take_ticket()
