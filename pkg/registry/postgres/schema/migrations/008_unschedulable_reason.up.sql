-- Why a node is not schedulable, one word (NodeCapacity's
-- status.unschedulableReason, a field selector): NotReady, else Cordoned,
-- else Tainted (a NoSchedule or NoExecute taint, as schedulable counts them);
-- '' when schedulable. store.Node.UnschedulableReason is the same rule in Go.
-- Adding a stored generated column rewrites cluster_node once.
ALTER TABLE cluster_node ADD COLUMN unschedulable_reason text COLLATE "C" NOT NULL GENERATED ALWAYS AS (
    CASE
        WHEN NOT ready THEN 'NotReady'
        WHEN unschedulable THEN 'Cordoned'
        WHEN jsonb_path_exists(taints, '$[*] ? (@.effect == "NoSchedule" || @.effect == "NoExecute")') THEN 'Tainted'
        ELSE ''
    END
) STORED;
