-- Registry schema: view rows (cluster_namespace, cluster_node) with
-- materialized aggregates, the raw rows they are computed from, metrics
-- samples, discovery cursors, and the registry-wide change sequence.
--
-- Key columns use COLLATE "C" so uniqueness, ordering and keyset pagination
-- are bytewise and independent of the database locale.

CREATE SEQUENCE registry_resource_version AS bigint;

-- One row: the resourceVersion of the latest committed change. Writers lock
-- it first, which serializes them so sequence order equals commit order.
CREATE TABLE registry_state (
    id               boolean PRIMARY KEY DEFAULT true CHECK (id),
    resource_version bigint  NOT NULL DEFAULT 0
);
INSERT INTO registry_state DEFAULT VALUES;

-- One row: the HMAC key for continue tokens, shared by all replicas.
CREATE TABLE registry_secret (
    id           boolean PRIMARY KEY DEFAULT true CHECK (id),
    continue_key bytea   NOT NULL
);
INSERT INTO registry_secret (continue_key)
VALUES (decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

CREATE TABLE cluster_namespace (
    cluster_id           text COLLATE "C" NOT NULL,
    name                 text COLLATE "C" NOT NULL,
    uid                  text        NOT NULL DEFAULT '',
    labels               jsonb       NOT NULL DEFAULT '{}',
    phase                text        NOT NULL DEFAULT '',
    created_at           timestamptz,
    first_seen           timestamptz NOT NULL DEFAULT now(),
    -- aggregates over cluster_pod (non-terminal pods) and cluster_resource_quota
    pod_count            bigint      NOT NULL DEFAULT 0,
    cpu_request_millis   bigint      NOT NULL DEFAULT 0,
    memory_request_bytes bigint      NOT NULL DEFAULT 0,
    quotas               jsonb       NOT NULL DEFAULT '[]',
    resource_version     bigint      NOT NULL,
    UNIQUE (cluster_id, name)
);
-- ClusterNamespace lists page by (object namespace, object name) = (name, cluster_id).
CREATE INDEX cluster_namespace_list_idx ON cluster_namespace (name, cluster_id);
CREATE INDEX cluster_namespace_labels_idx ON cluster_namespace USING gin (labels);

CREATE TABLE cluster_node (
    cluster_id               text COLLATE "C" NOT NULL,
    name                     text COLLATE "C" NOT NULL,
    uid                      text        NOT NULL DEFAULT '',
    labels                   jsonb       NOT NULL DEFAULT '{}',
    created_at               timestamptz,
    capacity_cpu_millis      bigint      NOT NULL DEFAULT 0,
    capacity_memory_bytes    bigint      NOT NULL DEFAULT 0,
    capacity_pods            bigint      NOT NULL DEFAULT 0,
    allocatable_cpu_millis   bigint      NOT NULL DEFAULT 0,
    allocatable_memory_bytes bigint      NOT NULL DEFAULT 0,
    allocatable_pods         bigint      NOT NULL DEFAULT 0,
    unschedulable            boolean     NOT NULL DEFAULT false,
    ready                    boolean     NOT NULL DEFAULT false,
    conditions               jsonb       NOT NULL DEFAULT '[]',
    taints                   jsonb       NOT NULL DEFAULT '[]',
    schedulable              boolean GENERATED ALWAYS AS (
        ready AND NOT unschedulable
        AND NOT jsonb_path_exists(taints, '$[*] ? (@.effect == "NoSchedule" || @.effect == "NoExecute")')
    ) STORED,
    -- aggregates over cluster_pod (non-terminal pods bound to the node)
    requested_cpu_millis     bigint      NOT NULL DEFAULT 0,
    requested_memory_bytes   bigint      NOT NULL DEFAULT 0,
    pod_count                bigint      NOT NULL DEFAULT 0,
    -- latest cluster_node_metrics sample, NULL when none
    usage_cpu_nanocores      bigint,
    usage_memory_bytes       bigint,
    usage_observed_at        timestamptz,
    usage_window_seconds     double precision,
    first_seen               timestamptz NOT NULL DEFAULT now(),
    resource_version         bigint      NOT NULL,
    -- also the keyset index of NodeCapacity lists, ordered by (cluster_id, name)
    UNIQUE (cluster_id, name)
);
CREATE INDEX cluster_node_labels_idx ON cluster_node USING gin (labels);

CREATE TABLE cluster_pod (
    cluster_id           text COLLATE "C" NOT NULL,
    namespace            text COLLATE "C" NOT NULL,
    name                 text COLLATE "C" NOT NULL,
    uid                  text   NOT NULL DEFAULT '',
    node_name            text COLLATE "C", -- NULL while unscheduled
    phase                text   NOT NULL DEFAULT '',
    cpu_request_millis   bigint NOT NULL DEFAULT 0,
    memory_request_bytes bigint NOT NULL DEFAULT 0,
    -- also serves lookups by (cluster_id, namespace)
    UNIQUE (cluster_id, namespace, name)
);
CREATE INDEX cluster_pod_node_idx ON cluster_pod (cluster_id, node_name);

CREATE TABLE cluster_resource_quota (
    cluster_id text COLLATE "C" NOT NULL,
    namespace  text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    hard       jsonb NOT NULL DEFAULT '{}',
    used       jsonb NOT NULL DEFAULT '{}',
    UNIQUE (cluster_id, namespace, name)
);

CREATE TABLE cluster_node_metrics (
    cluster_id          text COLLATE "C" NOT NULL,
    node                text COLLATE "C" NOT NULL,
    cpu_usage_nanocores bigint           NOT NULL,
    memory_usage_bytes  bigint           NOT NULL,
    observed_at         timestamptz      NOT NULL,
    window_seconds      double precision NOT NULL DEFAULT 0,
    UNIQUE (cluster_id, node, observed_at)
);

CREATE TABLE discovery_cursor (
    cluster_id       text COLLATE "C" NOT NULL,
    resource         text COLLATE "C" NOT NULL,
    resource_version text        NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster_id, resource)
);
