package registry

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	conversions = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "platform_watch",
		Name:           "conversions_total",
		Help:           "Changes converted to API objects for watches, by kind: once per change that any watch can want, however many receive it.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	encodings = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      "platform_watch",
		Name:           "event_encodings_total",
		Help:           "Watch events serialized: once per change, event type and encoding, shared by every watcher receiving it.",
		StabilityLevel: metrics.ALPHA,
	})
	watchRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "platform_watch",
		Name:           "requests_total",
		Help:           "Watch requests by kind and start: initial (initial events: a list's worth), resume (from a resourceVersion), now (from the present). A rise of initial watches or lists without new clients is a relist storm.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "start"})
	registerOnce sync.Once
)

// RegisterMetrics registers the watch metrics with the legacy registry.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(conversions, encodings, watchRequests) })
}
