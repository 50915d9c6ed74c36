package dispatcher

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func deviceClass(name, expr string) *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}}}
}

func claimTemplate(name string, requests ...resourcev1.DeviceRequest) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: requests}}}}
}

func exactly(name, class string, count int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: count}}
}

// A pod set's claims become PlacementReport devices per driver, through
// the manager's templates and classes; what cannot be counted per driver
// is unmodelled, naming why.
func TestClaimTemplates(t *testing.T) {
	kube := fake.NewClientset(
		deviceClass("gpu", `device.driver == "gpu.example.com"`),
		deviceClass("nic", ` device.driver=="nic.example.com" `),
		deviceClass("big-gpu", `device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].memory > 40`),
		claimTemplate("two-gpus", exactly("a", "gpu", 2)),
		claimTemplate("gpu-and-nic", exactly("g", "gpu", 0), exactly("n", "nic", 1)),
		claimTemplate("all", resourcev1.DeviceRequest{Name: "all", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeAll}}),
		claimTemplate("any", resourcev1.DeviceRequest{Name: "any", FirstAvailable: []resourcev1.DeviceSubRequest{{Name: "x", DeviceClassName: "gpu"}}}),
		claimTemplate("picky", exactly("p", "big-gpu", 1)),
		claimTemplate("no-class", exactly("p", "missing", 1)),
	)
	r := ClaimTemplates{Kube: kube}
	claim := func(tmpl string) corev1.PodResourceClaim {
		return corev1.PodResourceClaim{Name: tmpl, ResourceClaimTemplateName: new(tmpl)}
	}
	got, err := r.Devices(t.Context(), "team", "main", []corev1.PodResourceClaim{claim("two-gpus"), claim("gpu-and-nic")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Driver != "gpu.example.com" || got[0].Count != 3 || got[1].Driver != "nic.example.com" || got[1].Count != 1 {
		t.Errorf("devices %+v, want 3 of gpu.example.com (2, and 1 by default) and 1 of nic.example.com", got)
	}
	for _, c := range []struct {
		claim corev1.PodResourceClaim
		says  string
	}{
		{claim("all"), "all devices of a class"},
		{claim("any"), "first available"},
		{claim("picky"), "selects more than one driver's devices"},
		{claim("no-class"), "DeviceClass missing, which does not exist"},
		{claim("nowhere"), "ResourceClaimTemplate nowhere, which does not exist"},
		{corev1.PodResourceClaim{Name: "shared", ResourceClaimName: new("shared")}, "ResourceClaim its pods share"},
	} {
		_, err := r.Devices(t.Context(), "team", "main", []corev1.PodResourceClaim{c.claim})
		var u *Unmodelled
		if !errors.As(err, &u) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want unmodelled: %s", c.claim.Name, err, c.says)
		}
	}

	// Through PodSetsOf: the devices go into the question.
	wl := workload(kueue.PodSet{Name: "main", Count: 2, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{container("1", "1Gi")}, ResourceClaims: []corev1.PodResourceClaim{claim("two-gpus")}}}})
	wl.Namespace = "team"
	ps, err := PodSetsOf(t.Context(), wl, r)
	if err != nil || len(ps) != 1 || len(ps[0].Spec.Devices) != 1 || ps[0].Spec.Devices[0].Count != 2 {
		t.Errorf("PodSetsOf with claims: %+v, %v", ps, err)
	}
}
