-- This transaction's change-feed entries by kind: those above $1, the
-- writer's start version (a short primary-key range).
SELECT kind, count(*) FROM registry_change WHERE resource_version > $1 GROUP BY kind
