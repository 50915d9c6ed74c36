-- Records $2 as member $1's identity.
INSERT INTO discovery_member (cluster_id, identity) VALUES ($1, $2)
ON CONFLICT (cluster_id) DO UPDATE SET identity = EXCLUDED.identity, updated_at = now()
