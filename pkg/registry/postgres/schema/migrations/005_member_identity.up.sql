-- The identity of each member cluster discovery mirrors (the uid of its
-- kube-system namespace). Cursors are only meaningful for the cluster that
-- issued them: when the identity changes (etcd replaced, cluster rebuilt
-- under the same id) the cursors are dropped and discovery relists.
CREATE TABLE discovery_member (
    cluster_id text COLLATE "C" PRIMARY KEY,
    identity   text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
