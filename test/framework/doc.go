// Package framework starts a real, local control plane for integration tests and
// for `make run`: PostgreSQL, etcd, kube-apiserver with the aggregation layer,
// optionally kube-controller-manager, optionally a simulator (kwok nodes and
// metrics-server serving metrics.k8s.io), and the platform-apiserver binary
// registered through an APIService, all on 127.0.0.1 with PKI generated in Go;
// and, on request, a Prometheus scraping the platform-apiserver and
// evaluating the shipped alerts (StartPrometheus).
//
// Every process is started in its own process group, writes its output to
// <WorkDir>/<name>.log, and is stopped by pid (SIGTERM, then SIGKILL after a
// grace period) in reverse start order.
package framework
