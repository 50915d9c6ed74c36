// +k8s:deepcopy-gen=package
// +groupName=platform.example.io

// Package platform holds the internal (hub) types of the platform.example.io
// API group: read-only views of member clusters served from the registry.
package platform
