package views

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// unschedulableTaint is the taint kube-scheduler's NodeUnschedulable
// plugin checks a cordoned node's tolerations against.
var unschedulableTaint = store.Taint{Key: "node.kubernetes.io/unschedulable", Effect: "NoSchedule"}

// Placement answers q in one statement over cluster_node (docs/placement.md):
//   - a node is eligible when it matches the node terms (and has the
//     spread key): as kube-scheduler's topology spread, eligible nodes are
//     the domains' nodes whatever their taints;
//   - an eligible node takes fit replicas: 0 unless it is uncordoned (or
//     the cordon tolerated) and its NoSchedule and NoExecute taints are
//     tolerated, else the fewest that any requested resource, the pod
//     count or a device driver leaves room for;
//   - without a spread a member takes the sum of its nodes' fits; with
//     one, each domain takes at most the least domain's sum plus the skew
//     (the state the scheduler's one-at-a-time placement ends in).
//
// Every member considered has a row, with 0 when no node is eligible. The
// nodes are read in two parts: the schedulable ones, which pass any
// tolerations, from the free-CPU index alone when only CPU, memory and
// pods are asked for (migration 018), and the others, row by row with the
// tolerations, from their own index; without a spread, only nodes that can
// take a replica are read. The node terms' label tests use the labels' GIN
// index where they can. It may read a standby: the answer carries each
// member's mirroring state, not a resourceVersion.
func Placement(ctx context.Context, db Reader, q store.PlacementQuery) ([]store.MemberFit, error) {
	var args pgdb.Args
	members, err := placementMembers(&args, q)
	if err != nil {
		return nil, err
	}
	eligible, err := placementEligible(&args, q)
	if err != nil {
		return nil, err
	}
	domain, skew := "''", "NULL::bigint"
	if q.SpreadKey != "" {
		key := args.Add(q.SpreadKey)
		domain, skew = "labels->>"+key+"::text", args.Add(q.MaxSkew)+"::bigint"
		eligible = append(eligible, "labels ? "+key+"::text")
	}
	feasible, err := placementFeasible(&args, q)
	if err != nil {
		return nil, err
	}
	room := "greatest(0, least(" + strings.Join(placementRoom(&args, q), ", ") + "))"
	scope := "cluster_id IN (SELECT cluster_id FROM members) AND " + strings.Join(eligible, " AND ")
	// Without a spread, only nodes that can take a replica count, so the
	// schedulable ones need the CPU asked for free, and when nothing is
	// tolerated the others must be uncordoned and untainted: not ready.
	// A spread counts every eligible node as its domain's.
	schedulable, other := scope, scope
	if q.SpreadKey == "" && q.CPUMillis > 0 {
		schedulable += " AND (allocatable_cpu_millis::numeric - requested_cpu_millis) >= " + args.Add(q.CPUMillis) + "::numeric"
	}
	if q.SpreadKey == "" && len(q.Tolerations) == 0 {
		other += " AND unschedulable_reason = 'NotReady'"
	}
	sql := `
		WITH members AS (` + members + `),
		nodes AS (
			SELECT cluster_id, ` + domain + ` AS domain, ` + room + ` AS fit
			FROM cluster_node WHERE schedulable AND ` + schedulable + `
			UNION ALL
			SELECT cluster_id, ` + domain + `, CASE WHEN ` + feasible + ` THEN ` + room + ` ELSE 0 END
			FROM cluster_node WHERE NOT schedulable AND ` + other + `
		),
		domains AS (
			SELECT cluster_id, sum(fit) AS fit, count(*) FILTER (WHERE fit > 0) AS nodes,
				min(sum(fit)) OVER (PARTITION BY cluster_id) AS least_domain
			FROM nodes GROUP BY cluster_id, domain
		)
		SELECT m.cluster_id, coalesce(sum(least(d.fit, d.least_domain + ` + skew + `)), 0)::bigint,
			coalesce(sum(d.nodes), 0)::bigint, coalesce(m.mirroring, ''), m.mirroring_since, m.complete_as_of
		FROM members m LEFT JOIN domains d USING (cluster_id)
		GROUP BY m.cluster_id, m.mirroring, m.mirroring_since, m.complete_as_of
		ORDER BY m.cluster_id`
	var fits []store.MemberFit
	err = db.ReadTx(ctx, store.Freshness{}, func(tx pgx.Tx) error {
		// A scan of every node crosses jit_above_cost: compiling the
		// expressions took longer (1.3 s) than running them (0.6 s).
		if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		fits = fits[:0]
		var f store.MemberFit
		var since, complete *time.Time
		_, err = pgx.ForEachRow(rows, []any{&f.ClusterID, &f.Fits, &f.Nodes, &f.Mirroring, &since, &complete}, func() error {
			f.MirroringSince, f.CompleteAsOf = time.Time{}, time.Time{}
			if since != nil {
				f.MirroringSince = since.UTC()
			}
			if complete != nil {
				f.CompleteAsOf = complete.UTC()
			}
			fits = append(fits, f)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("placement: %w", pgdb.InterpretError(err))
	}
	return fits, nil
}

// placementMembers selects the members q considers from cluster_capacity.
func placementMembers(a *pgdb.Args, q store.PlacementQuery) (string, error) {
	sql := "SELECT cluster_id, mirroring, mirroring_since, complete_as_of FROM cluster_capacity"
	switch {
	case len(q.Clusters) > 0:
		return sql + " WHERE cluster_id = ANY(" + a.Add(q.Clusters) + "::text[])", nil
	case len(q.Members) > 0:
		conds, err := SelectorSQL(a, q.Members, nil)
		if err != nil {
			return "", fmt.Errorf("%w: %w", store.ErrInvalidSelector, err)
		}
		return sql + " WHERE " + strings.Join(conds, " AND "), nil
	}
	return sql, nil
}

// placementEligible is the node terms as conditions to AND: one, an OR of
// the terms, each the AND of its requirements.
func placementEligible(a *pgdb.Args, q store.PlacementQuery) ([]string, error) {
	if len(q.Nodes) == 0 {
		return []string{"true"}, nil
	}
	terms := make([]string, 0, len(q.Nodes))
	for _, t := range q.Nodes {
		conds, err := SelectorSQL(a, t.Labels, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", store.ErrInvalidSelector, err)
		}
		if len(t.Names) > 0 {
			conds = append(conds, "name = ANY("+a.Add(t.Names)+"::text[])")
		}
		if len(t.NotNames) > 0 {
			conds = append(conds, "name <> ALL("+a.Add(t.NotNames)+"::text[])")
		}
		if len(conds) == 0 {
			conds = []string{"false"} // an empty term matches no node, as in kube-scheduler
		}
		terms = append(terms, "("+strings.Join(conds, " AND ")+")")
	}
	return []string{"(" + strings.Join(terms, " OR ") + ")"}, nil
}

// placementFeasible is the condition under which an eligible node takes a
// replica at all: its cordon and its NoSchedule and NoExecute taints
// tolerated (store.Toleration.Tolerates, in SQL).
func placementFeasible(a *pgdb.Args, q store.PlacementQuery) (string, error) {
	tolerations, err := json.Marshal(append([]store.Toleration{}, q.Tolerations...)) // [], not null
	if err != nil {
		return "", err
	}
	cordon := "NOT unschedulable"
	if slices.ContainsFunc(q.Tolerations, func(t store.Toleration) bool { return t.Tolerates(unschedulableTaint) }) {
		cordon = "true"
	}
	return cordon + ` AND (taints = '[]'::jsonb OR NOT EXISTS (
		SELECT 1 FROM jsonb_array_elements(taints) t
		WHERE t->>'effect' IN ('NoSchedule', 'NoExecute') AND NOT EXISTS (
			SELECT 1 FROM jsonb_to_recordset(` + a.Add(string(tolerations)) + `::jsonb) AS o(key text, operator text, value text, effect text)
			WHERE (o.effect = '' OR o.effect = t->>'effect') AND (o.key = '' OR o.key = t->>'key')
				AND (o.operator = 'Exists' OR (o.operator IN ('', 'Equal') AND o.value = coalesce(t->>'value', ''))))))`, nil
}

// placementRoom are the replicas each request leaves room for on a node,
// as least()'s arguments: the pod count always, each resource requested
// in allocatable minus requested (a resource the node lacks has none),
// each device driver in its free devices.
func placementRoom(a *pgdb.Args, q store.PlacementQuery) []string {
	room := []string{"allocatable_pods - pod_count"}
	if q.CPUMillis > 0 {
		room = append(room, "(allocatable_cpu_millis - requested_cpu_millis) / "+a.Add(q.CPUMillis)+"::bigint")
	}
	if q.MemoryBytes > 0 {
		room = append(room, "(allocatable_memory_bytes - requested_memory_bytes) / "+a.Add(q.MemoryBytes)+"::bigint")
	}
	keyed := func(have, taken string, amounts map[string]int64) string {
		names := slices.Sorted(maps.Keys(amounts))
		values := make([]int64, len(names))
		for i, n := range names {
			values[i] = amounts[n]
		}
		return `(SELECT min((coalesce((` + have + `->>r.name)::bigint, 0) - coalesce((` + taken + `->>r.name)::bigint, 0)) / r.amount)
			FROM unnest(` + a.Add(names) + `::text[], ` + a.Add(values) + `::bigint[]) AS r(name, amount))`
	}
	if len(q.Other) > 0 {
		room = append(room, keyed("allocatable_other", "requested_other", q.Other))
	}
	if len(q.Devices) > 0 {
		room = append(room, keyed("devices_total", "devices_allocated", q.Devices))
	}
	return room
}
