package discovery

import (
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// convertResourceClaim records what device counts need of a member
// ResourceClaim (resource.k8s.io/v1): every device class its requests name
// (spec.devices.requests[].exactly.deviceClassName, and each
// firstAvailable subrequest's class) with the number of devices
// status.allocation gave to the requests of that class, and the allocated
// devices. A result with adminAccess does not take its device (the device
// stays free for other claims), so it is left out of both.
func convertResourceClaim(c *resourcev1.ResourceClaim) (store.ResourceClaim, []issue) {
	var issues []issue
	rec := store.ResourceClaim{Namespace: c.Namespace, Name: c.Name, UID: string(c.UID)}
	// classOf maps each request an allocation result can name to its
	// class: an exact request by its name, a subrequest as
	// "<request>/<subrequest>".
	classOf := map[string]string{}
	name := func(request, field, class string) {
		if class == "" {
			issues = append(issues, issue{Field: field, Value: "", Reason: "no device class; the request is not counted"})
			return
		}
		if rec.Classes == nil {
			rec.Classes = map[string]int64{}
		}
		rec.Classes[class] += 0
		classOf[request] = class
	}
	for _, r := range c.Spec.Devices.Requests {
		field := "spec.devices.requests[" + r.Name + "]"
		switch {
		case r.Exactly != nil:
			name(r.Name, field+".exactly.deviceClassName", r.Exactly.DeviceClassName)
		case len(r.FirstAvailable) > 0:
			for _, sub := range r.FirstAvailable {
				name(r.Name+"/"+sub.Name, field+".firstAvailable["+sub.Name+"].deviceClassName", sub.DeviceClassName)
			}
		default:
			// A request kind newer than the API types discovery is built with.
			issues = append(issues, issue{Field: field, Value: "", Reason: "neither exactly nor firstAvailable; the request is not counted"})
		}
	}
	if c.Status.Allocation == nil {
		return rec, issues
	}
	for _, res := range c.Status.Allocation.Devices.Results {
		if isTrue(res.AdminAccess) {
			continue
		}
		rec.Allocated = append(rec.Allocated, store.DeviceRef{Driver: res.Driver, Pool: res.Pool, Device: res.Device})
		class, ok := classOf[res.Request]
		if !ok {
			issues = append(issues, issue{Field: "status.allocation.devices.results[].request", Value: res.Request,
				Reason: "names no request of the claim; the device counts as allocated but for no class"})
			continue
		}
		rec.Classes[class]++
	}
	return rec, issues
}
