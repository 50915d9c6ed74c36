-- DRA devices (issue 22): a member's ResourceSlices and ResourceClaims
-- (resource.k8s.io), and the device counts of the views kept from them
-- (docs/registry.md, "DRA devices").

-- One row per ResourceSlice: its devices by name. node_name is NULL for
-- devices not local to one node (spec.allNodes, spec.nodeSelector).
CREATE TABLE cluster_resource_slice (
    cluster_id      text COLLATE "C" NOT NULL,
    name            text COLLATE "C" NOT NULL,
    node_name       text COLLATE "C",
    driver          text COLLATE "C" NOT NULL,
    pool            text COLLATE "C" NOT NULL,
    pool_generation bigint NOT NULL DEFAULT 0,
    devices         text[] COLLATE "C" NOT NULL DEFAULT '{}',
    PRIMARY KEY (cluster_id, name)
);
CREATE INDEX cluster_resource_slice_pool_idx ON cluster_resource_slice (cluster_id, driver, pool);
CREATE INDEX cluster_resource_slice_node_idx ON cluster_resource_slice (cluster_id, node_name) WHERE node_name IS NOT NULL;

-- One row per ResourceClaim: classes holds, per device class its requests
-- name, the devices allocated to them (0 until allocated); allocated is
-- status.allocation's results, [{"driver", "pool", "device"}].
CREATE TABLE cluster_resource_claim (
    cluster_id text COLLATE "C" NOT NULL,
    namespace  text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    uid        text NOT NULL DEFAULT '',
    classes    jsonb NOT NULL DEFAULT '{}',
    allocated  jsonb NOT NULL DEFAULT '[]',
    PRIMARY KEY (cluster_id, namespace, name)
);

-- The allocated devices of every claim, one row each: whether a device is
-- allocated is one index probe.
CREATE TABLE cluster_claim_device (
    cluster_id text COLLATE "C" NOT NULL,
    driver     text COLLATE "C" NOT NULL,
    pool       text COLLATE "C" NOT NULL,
    device     text COLLATE "C" NOT NULL,
    namespace  text COLLATE "C" NOT NULL,
    claim      text COLLATE "C" NOT NULL,
    PRIMARY KEY (cluster_id, driver, pool, device, namespace, claim)
);
CREATE INDEX cluster_claim_device_claim_idx ON cluster_claim_device (cluster_id, namespace, claim);

-- Per driver, the devices of ResourceSlices local to the node (newest
-- pool generation only) and how many of them are allocated.
ALTER TABLE cluster_node
    ADD COLUMN devices_total     jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN devices_allocated jsonb NOT NULL DEFAULT '{}';
-- Per device class, {"claims": n, "devices": m}: the namespace's claims
-- with a request of the class and the devices allocated to them.
ALTER TABLE cluster_namespace ADD COLUMN device_claims jsonb NOT NULL DEFAULT '{}';
-- The member's devices per driver over every slice, the nodes with one,
-- and member_apis: per DRA resource, "Served" once a list of it committed,
-- "Absent" when the member answered 404, "Forbidden" on 403 ('{}' before
-- discovery looked).
ALTER TABLE cluster_capacity
    ADD COLUMN devices_total     jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN devices_allocated jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN devices_nodes     jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN member_apis       jsonb NOT NULL DEFAULT '{}';

-- registry_current_slices are member m's slices of each pool's newest
-- generation, the ones that count.
CREATE FUNCTION registry_current_slices(m text) RETURNS SETOF cluster_resource_slice LANGUAGE sql STABLE AS $$
    SELECT s.* FROM cluster_resource_slice s
    WHERE s.cluster_id = m AND s.pool_generation = (
        SELECT max(p.pool_generation) FROM cluster_resource_slice p
        WHERE p.cluster_id = s.cluster_id AND p.driver = s.driver AND p.pool = s.pool)
$$;
