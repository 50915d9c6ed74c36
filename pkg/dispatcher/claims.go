package dispatcher

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	platform "github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
)

// DeviceResolver turns a pod template's resource claims into the DRA
// devices one replica needs, per driver (PlacementReport's devices). A
// claim it cannot count is an *Unmodelled error naming why.
type DeviceResolver interface {
	Devices(ctx context.Context, namespace, podSet string, claims []corev1.PodResourceClaim) ([]platform.DeviceRequest, error)
}

// ClaimTemplates resolves claims through the ResourceClaimTemplates and
// DeviceClasses of Kueue's manager cluster, where the Workload's pod
// templates name them (a worker gets the same objects with the Job).
type ClaimTemplates struct {
	Kube kubernetes.Interface
}

// driverSelector is a DeviceClass selector that selects a driver's
// devices and nothing else: device.driver == "gpu.example.com".
var driverSelector = regexp.MustCompile(`^device\.driver\s*==\s*"([^"\\]+)"$`)

// Devices sums, per driver, the devices of every claim's template: each
// request asking an exact count (1 by default) of a DeviceClass that
// selects one driver. A claim of a ResourceClaim shared by the pods, a
// request for all devices, a first-available list, selectors on devices'
// attributes, admin access and constraints between devices are not
// counted by PlacementReport: Unmodelled.
func (r ClaimTemplates) Devices(ctx context.Context, namespace, podSet string, claims []corev1.PodResourceClaim) ([]platform.DeviceRequest, error) {
	unmodelled := func(format string, args ...any) error {
		return &Unmodelled{PodSet: podSet, Reason: fmt.Sprintf(format, args...)}
	}
	perDriver := map[string]int64{}
	for _, c := range claims {
		if c.ResourceClaimTemplateName == nil {
			return nil, unmodelled("claims the ResourceClaim its pods share (%s)", c.Name)
		}
		tmpl, err := r.Kube.ResourceV1().ResourceClaimTemplates(namespace).Get(ctx, *c.ResourceClaimTemplateName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, unmodelled("claims from ResourceClaimTemplate %s, which does not exist", *c.ResourceClaimTemplateName)
		}
		if err != nil {
			return nil, fmt.Errorf("ResourceClaimTemplate %s/%s: %w", namespace, *c.ResourceClaimTemplateName, err)
		}
		devices := tmpl.Spec.Spec.Devices
		if len(devices.Constraints) > 0 {
			return nil, unmodelled("claims devices with constraints between them (ResourceClaimTemplate %s)", tmpl.Name)
		}
		for _, req := range devices.Requests {
			ex := req.Exactly
			switch {
			case ex == nil:
				return nil, unmodelled("asks the first available of several device requests (%s/%s)", tmpl.Name, req.Name)
			case ex.AllocationMode == resourcev1.DeviceAllocationModeAll:
				return nil, unmodelled("asks all devices of a class (%s/%s)", tmpl.Name, req.Name)
			case len(ex.Selectors) > 0:
				return nil, unmodelled("selects devices by their attributes (%s/%s)", tmpl.Name, req.Name)
			case ex.AdminAccess != nil && *ex.AdminAccess:
				return nil, unmodelled("asks admin access to devices (%s/%s)", tmpl.Name, req.Name)
			}
			driver, err := r.driverOf(ctx, ex.DeviceClassName, unmodelled)
			if err != nil {
				return nil, err
			}
			perDriver[driver] += max(ex.Count, 1)
		}
	}
	out := make([]platform.DeviceRequest, 0, len(perDriver))
	for d, n := range perDriver {
		out = append(out, platform.DeviceRequest{Driver: d, Count: n})
	}
	slices.SortFunc(out, func(a, b platform.DeviceRequest) int { return strings.Compare(a.Driver, b.Driver) })
	return out, nil
}

// driverOf is the one driver whose devices the DeviceClass selects.
func (r ClaimTemplates) driverOf(ctx context.Context, class string, unmodelled func(string, ...any) error) (string, error) {
	dc, err := r.Kube.ResourceV1().DeviceClasses().Get(ctx, class, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", unmodelled("asks DeviceClass %s, which does not exist", class)
	}
	if err != nil {
		return "", fmt.Errorf("DeviceClass %s: %w", class, err)
	}
	if len(dc.Spec.Selectors) == 1 && dc.Spec.Selectors[0].CEL != nil {
		if m := driverSelector.FindStringSubmatch(strings.TrimSpace(dc.Spec.Selectors[0].CEL.Expression)); m != nil {
			return m[1], nil
		}
	}
	return "", unmodelled("asks DeviceClass %s, which selects more than one driver's devices (its selectors are not device.driver == \"...\")", class)
}
