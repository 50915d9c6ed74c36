// Package registry holds what the per-resource REST storages share: turning
// Kubernetes list options into store options, store errors into API status
// errors, and objects into kubectl tables. The storages themselves live in one
// folder per resource (clusternamespace, nodecapacity) and read through the
// small interfaces of pkg/registry/store.
package registry
