// +k8s:openapi-gen=true
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/example/platform-apiserver/pkg/apis/platform
// +k8s:defaulter-gen=TypeMeta
// +k8s:openapi-model-package=io.example.platform.v1alpha1
// +groupName=platform.example.io

// Package v1alpha1 is the v1alpha1 version of the platform.example.io API:
// read-only views of member clusters (ClusterNamespace, NodeCapacity).
package v1alpha1
