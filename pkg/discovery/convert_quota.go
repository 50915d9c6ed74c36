package discovery

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// convertQuota records a member ResourceQuota's hard and used amounts as
// canonical quantity strings, and its scopes. Hard is the enforced
// status.hard, or spec.hard until the quota controller has filled it in.
func convertQuota(rq *corev1.ResourceQuota) store.Quota {
	hard := rq.Status.Hard
	if len(hard) == 0 {
		hard = rq.Spec.Hard
	}
	return store.Quota{
		Namespace: rq.Namespace,
		Name:      rq.Name,
		Hard:      quantityStrings(hard),
		Used:      quantityStrings(rq.Status.Used),
		Scopes:    quotaScopes(rq.Spec),
	}
}

// quotaScopes names a quota's scopes: spec.scopes, then each expression of
// spec.scopeSelector as "<scope> <operator>" and its values after a space,
// comma-separated ("PriorityClass In high,low"). Quota admission matches a
// pod against all of them; the registry needs only whether there are any
// (a quota without scopes counts every pod of its namespace).
func quotaScopes(spec corev1.ResourceQuotaSpec) []string {
	var out []string
	for _, s := range spec.Scopes {
		out = append(out, string(s))
	}
	if sel := spec.ScopeSelector; sel != nil {
		for _, e := range sel.MatchExpressions {
			s := string(e.ScopeName) + " " + string(e.Operator)
			if len(e.Values) > 0 {
				s += " " + strings.Join(e.Values, ",")
			}
			out = append(out, s)
		}
	}
	return out
}

func quantityStrings(list corev1.ResourceList) map[string]string {
	if len(list) == 0 {
		return nil
	}
	out := make(map[string]string, len(list))
	for name, q := range list {
		out[string(name)] = q.String()
	}
	return out
}
