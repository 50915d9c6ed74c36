package dispatcher

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	platform "github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
)

// Candidate is a MultiKueue worker cluster the Workload's admission check
// may dispatch to and the registry member that mirrors it.
type Candidate struct {
	// Cluster is the MultiKueueCluster's name: what is nominated.
	Cluster string
	// Member is the registry member's id: what PlacementReport answers for.
	Member string
}

// Fallback is what to do when no member fits a Workload now.
type Fallback string

const (
	// FallbackWait nominates nobody and asks again later.
	FallbackWait Fallback = "wait"
	// FallbackMostRoom nominates the member closest to fitting.
	FallbackMostRoom Fallback = "most-room"
)

// Policy is how Choose decides.
type Policy struct {
	// MaxDataAge: a member whose data is older (PlacementReport's
	// dataAge, or stale without an age) is never nominated.
	MaxDataAge time.Duration
	// WhenNothingFits is the fallback.
	WhenNothingFits Fallback
}

// Reasons of a decision, also the reasons of the Workload's condition and
// events and the values of the nominations metric's reason label.
const (
	ReasonFits        = "Fits"
	ReasonMostRoom    = "NothingFitsMostRoom"
	ReasonWaiting     = "NothingFitsWaiting"
	ReasonUnmodelled  = "Unmodelled"
	ReasonNoCandidate = "NoCurrentMember"
)

// Verdict is one candidate as Choose saw it.
type Verdict struct {
	Candidate
	// Excluded says why the candidate may not be nominated at all.
	Excluded string
	Stale    bool
	DataAge  time.Duration
	// Fits says every pod set fits with the room promised to others
	// taken out.
	Fits bool
	// Room is the least, over the pod sets, of the replicas that would
	// still fit after this Workload's, as a share of its count: 0 means
	// just fits, negative does not fit.
	Room float64
}

func (v Verdict) String() string {
	switch {
	case v.Excluded != "":
		return fmt.Sprintf("%s: %s", v.Cluster, v.Excluded)
	case v.Fits:
		return fmt.Sprintf("%s: fits, room after %.0f%%%s", v.Cluster, 100*v.Room, staleNote(v))
	default:
		return fmt.Sprintf("%s: does not fit (%.0f%% of it)%s", v.Cluster, 100*(1+v.Room), staleNote(v))
	}
}

func staleNote(v Verdict) string {
	if !v.Stale {
		return ""
	}
	return fmt.Sprintf(", data %s old", v.DataAge.Round(time.Second))
}

// Decision is whom to nominate and why.
type Decision struct {
	// Nominate are MultiKueueCluster names; empty means wait.
	Nominate []string
	// Member is the registry member of a single nomination.
	Member  string
	Reason  string
	Message string
	// Verdicts are the candidates, best first.
	Verdicts []Verdict
}

// MemberRoom is what Choose knows of a member beside the PlacementReports:
// its free room (per resource, with pods and DevicePrefix drivers, as its
// ClusterCapacity sums it; nil when unknown) and the room promised there
// to Workloads nominated but not yet mirrored (the Ledger's).
type MemberRoom struct {
	Free, Promised corev1.ResourceList
}

// Choose picks the member for a Workload from one PlacementReport answer
// per pod set (answers[i] is podSets[i]'s, by member). A member fits when
// every pod set's replicas fit, counting no more replicas than its free
// room holds after what was promised there (see left). Order: fitting
// members before the others, current data before stale, then the most
// room left after the Workload, then the name. Members without an answer
// or with data older than MaxDataAge are never nominated.
func Choose(podSets []PodSet, answers []map[string]platform.PlacementClusterFit, cands []Candidate, room func(member string) MemberRoom, p Policy) Decision {
	verdicts := make([]Verdict, 0, len(cands))
	for _, c := range cands {
		verdicts = append(verdicts, judge(c, podSets, answers, room(c.Member), p))
	}
	sort.SliceStable(verdicts, func(i, j int) bool { return better(verdicts[i], verdicts[j]) })
	d := Decision{Verdicts: verdicts}
	summary := summarize(verdicts)
	switch best := first(verdicts); {
	case best == nil:
		d.Reason = ReasonNoCandidate
		d.Message = "no member may be nominated: " + summary
	case best.Fits:
		d.Nominate, d.Member, d.Reason = []string{best.Cluster}, best.Member, ReasonFits
		d.Message = fmt.Sprintf("nominated %s, where every pod set fits: %s", best.Cluster, summary)
	case p.WhenNothingFits == FallbackMostRoom:
		d.Nominate, d.Member, d.Reason = []string{best.Cluster}, best.Member, ReasonMostRoom
		d.Message = fmt.Sprintf("no member fits now; nominated %s, the closest to fitting (fallback most-room): %s", best.Cluster, summary)
	default:
		d.Reason = ReasonWaiting
		d.Message = "no member fits now; waiting for room (fallback wait): " + summary
	}
	return d
}

func judge(c Candidate, podSets []PodSet, answers []map[string]platform.PlacementClusterFit, m MemberRoom, p Policy) Verdict {
	v := Verdict{Candidate: c, Fits: true, Room: math.Inf(1)}
	for i, ps := range podSets {
		fit, ok := answers[i][c.Member]
		if !ok {
			v.Excluded = fmt.Sprintf("member %q is not in the registry", c.Member)
			return v
		}
		if fit.Stale {
			v.Stale = true
			if fit.DataAge == nil {
				v.Excluded = "stale, of unknown age"
				return v
			}
			v.DataAge = max(v.DataAge, fit.DataAge.Duration)
		}
		effective := fit.Fits
		if n, ok := left(ps, m); ok {
			effective = min(effective, n)
		}
		room := float64(effective-ps.Count) / float64(max(ps.Count, 1))
		v.Room = min(v.Room, room)
		v.Fits = v.Fits && effective >= ps.Count
	}
	if len(podSets) == 0 {
		v.Room = 0
	}
	if v.Stale && v.DataAge > p.MaxDataAge {
		v.Excluded = fmt.Sprintf("data %s old, over the bound of %s", v.DataAge.Round(time.Second), p.MaxDataAge)
	}
	return v
}

// left is how many replicas of the pod set the member's free room holds
// after the room promised there: for each resource a replica takes,
// (free - promised) / per replica, rounded down; the least of them. It
// caps PlacementReport's count, which counts mirrored pods only; false
// when nothing is promised there (the count stands) or the free room is
// unknown. Per member, not per node: it assumes the promised pods take
// room where the new ones would fit (docs/dispatcher.md).
func left(ps PodSet, m MemberRoom) (int64, bool) {
	if len(m.Promised) == 0 || m.Free == nil {
		return 0, false
	}
	most := int64(math.MaxInt64)
	for name, per := range ps.PerReplica() {
		if per.IsZero() {
			continue
		}
		free := m.Free[name]
		room := free.AsApproximateFloat64()
		if promised, ok := m.Promised[name]; ok {
			room -= promised.AsApproximateFloat64()
		}
		most = min(most, int64(math.Floor(max(room, 0)/per.AsApproximateFloat64())))
	}
	return most, true
}

func better(a, b Verdict) bool {
	if (a.Excluded == "") != (b.Excluded == "") {
		return a.Excluded == ""
	}
	if a.Fits != b.Fits {
		return a.Fits
	}
	if a.Stale != b.Stale {
		return !a.Stale
	}
	if a.Room != b.Room {
		return a.Room > b.Room
	}
	return a.Cluster < b.Cluster
}

func first(vs []Verdict) *Verdict {
	if len(vs) == 0 || vs[0].Excluded != "" {
		return nil
	}
	return &vs[0]
}

func summarize(vs []Verdict) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		parts = append(parts, v.String())
	}
	if len(parts) == 0 {
		return "no worker clusters"
	}
	return strings.Join(parts, "; ")
}
