-- Gives member $1 a fresh epoch, owned by $2, and returns it; no row when
-- the member is removed.
INSERT INTO discovery_member AS m (cluster_id, epoch, owner) VALUES ($1, nextval('discovery_member_epoch'), $2)
ON CONFLICT (cluster_id) DO UPDATE SET epoch = EXCLUDED.epoch, owner = EXCLUDED.owner, updated_at = now()
WHERE m.removed_at IS NULL
RETURNING m.epoch
