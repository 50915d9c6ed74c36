-- The gadgets' table; its columns are the view's (view.go), with labels
-- and cluster_id, which every kind's selectors read.
CREATE TABLE test_gadget (
    cluster_id text NOT NULL,
    name text NOT NULL,
    labels jsonb NOT NULL DEFAULT '{}',
    color text NOT NULL,
    first_seen timestamptz NOT NULL DEFAULT now(),
    resource_version bigint NOT NULL,
    PRIMARY KEY (cluster_id, name)
);
SELECT registry_define_view('test_gadget', 'Gadget');
