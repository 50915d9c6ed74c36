package framework

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// The platform API as registered with the aggregator.
const (
	PlatformGroup        = "platform.example.io"
	PlatformVersion      = "v1alpha1"
	PlatformGroupVersion = PlatformGroup + "/" + PlatformVersion
	// APIServiceName is the name of the APIService that Start registers.
	APIServiceName = PlatformVersion + "." + PlatformGroup
)

const platformServedTimeout = 2 * time.Minute

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// registerPlatform creates the Namespace, the ExternalName Service and the
// APIService through which kube-apiserver proxies the platform group.
func (cp *ControlPlane) registerPlatform(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return fmt.Errorf("build kube-apiserver client: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", platformNamespace, err)
	}
	// Endpoints may not point at loopback, so the Service names localhost and
	// the aggregator dials localhost:<APIService port>.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: platformServiceName, Namespace: platformNamespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(cp.platformPort)}},
		},
	}
	if _, err := client.CoreV1().Services(platformNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service %s/%s: %w", platformNamespace, platformServiceName, err)
	}
	if err := cp.applyAPIService(ctx); err != nil {
		return err
	}
	cp.platformRegistered = true
	klog.InfoS("Registered platform-apiserver with the aggregator", "apiService", APIServiceName, "port", cp.platformPort)
	return nil
}

func (cp *ControlPlane) applyAPIService(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(cp.adminConfig)
	if err != nil {
		return fmt.Errorf("build dynamic client: %w", err)
	}
	spec := map[string]any{
		"group":                PlatformGroup,
		"version":              PlatformVersion,
		"groupPriorityMinimum": int64(1000),
		"versionPriority":      int64(15),
		"service": map[string]any{
			"namespace": platformNamespace,
			"name":      platformServiceName,
			"port":      int64(cp.platformPort),
		},
		// The aggregator verifies the backend against this CA; never skip TLS verification.
		"caBundle": base64.StdEncoding.EncodeToString(cp.pki.platformCA.certPEM),
	}
	apiServices := dyn.Resource(apiServiceGVR)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": APIServiceName},
		"spec":       spec,
	}}
	_, err = apiServices.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := apiServices.Get(ctx, APIServiceName, metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("get APIService %s: %w", APIServiceName, getErr)
		}
		existing.Object["spec"] = spec
		_, err = apiServices.Update(ctx, existing, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("apply APIService %s: %w", APIServiceName, err)
	}
	return nil
}

// waitPlatformServed waits until the APIService reports Available=True and
// kube-apiserver answers discovery for the platform group version.
func (cp *ControlPlane) waitPlatformServed(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(cp.adminConfig)
	if err != nil {
		return fmt.Errorf("build dynamic client: %w", err)
	}
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return fmt.Errorf("build kube-apiserver client: %w", err)
	}
	start := time.Now()
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, platformServedTimeout, true, func(ctx context.Context) (bool, error) {
		if done, exitErr := cp.platform.exited(); done {
			return false, fmt.Errorf("platform-apiserver exited: %v", exitErr)
		}
		obj, err := dyn.Resource(apiServiceGVR).Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if ok, msg := apiServiceAvailable(obj); !ok {
			last = "APIService not Available: " + msg
			return false, nil
		}
		if _, err := client.Discovery().ServerResourcesForGroupVersion(PlatformGroupVersion); err != nil {
			last = "discovery of " + PlatformGroupVersion + " through kube-apiserver: " + err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be served through kube-apiserver: %w (last: %s); platform-apiserver log %s ends:\n%s",
			PlatformGroupVersion, err, last, cp.platform.logPath(), logTail(cp.platform.logPath(), 30))
	}
	klog.InfoS("Platform API served through kube-apiserver", "groupVersion", PlatformGroupVersion, "after", time.Since(start).Round(time.Millisecond))
	return nil
}

// apiServiceAvailable reports whether obj has condition Available=True, and
// otherwise that condition's reason and message.
func apiServiceAvailable(obj *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Available" {
			continue
		}
		return m["status"] == "True", fmt.Sprintf("%v: %v", m["reason"], m["message"])
	}
	return false, "no Available condition yet"
}
