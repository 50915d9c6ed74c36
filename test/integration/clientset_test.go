package integration

import (
	"strconv"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (e *env) testClientset(t *testing.T) {
	ctx := t.Context()
	ncs := e.platform.PlatformV1alpha1().NodeCapacities()

	nc, err := ncs.Get(ctx, "prod-1.n3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nc.Status.Schedulable || len(nc.Status.Taints) != 1 || nc.Status.Taints[0].Effect != "NoSchedule" {
		t.Errorf("prod-1.n3 = %+v, want unschedulable with one NoSchedule taint", nc.Status)
	}

	list, err := ncs.List(ctx, metav1.ListOptions{LabelSelector: "pool=big", FieldSelector: "status.cluster=prod-2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != fixtureBigPool-1 {
		t.Errorf("list pool=big in prod-2: %d items, want %d", len(list.Items), fixtureBigPool-1)
	}
	listRV, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("list resourceVersion %q: %v", list.ResourceVersion, err)
	}
	for _, item := range list.Items {
		if rv, _ := strconv.ParseInt(item.ResourceVersion, 10, 64); rv <= 0 || rv > listRV {
			t.Errorf("%s resourceVersion %s not in (0, list %d]", item.Name, item.ResourceVersion, listRV)
		}
	}

	for _, name := range []string{"prod-1.nope", "no-dot", "prod-9.n1", ".n1"} {
		if _, err := ncs.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get %q: %v, want NotFound", name, err)
		}
	}

	cns, err := e.platform.PlatformV1alpha1().ClusterNamespaces("team-a").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cns.Items) != fixtureClusterNSTeamA {
		t.Errorf("clusternamespaces in team-a: %d, want %d", len(cns.Items), fixtureClusterNSTeamA)
	}
	cn, err := e.platform.PlatformV1alpha1().ClusterNamespaces("team-a").Get(ctx, "prod-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cn.Status.Quotas) != 1 || cn.Status.Quotas[0].Name != "compute" {
		t.Errorf("team-a/prod-1 quotas = %+v", cn.Status.Quotas)
	}
	if hard := cn.Status.Quotas[0].Hard["requests.cpu"]; hard.String() != "4" {
		t.Errorf("quota hard requests.cpu = %s, want 4", hard.String())
	}
}
