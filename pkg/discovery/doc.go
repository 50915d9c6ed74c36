// Package discovery keeps the registry fresh: for each member cluster it
// lists and then watches namespaces, nodes, pods and resource quotas, turns
// each object into a thin store record as soon as it arrives, and commits the
// records together with the resourceVersion they reach in one store.Writer
// Apply per batch. A restart resumes from that persisted cursor; a 410 Gone
// relists and reconciles. Replicas share the members: each member is
// mirrored by the replica holding its Lease (package shard).
package discovery
