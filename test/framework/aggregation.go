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

// aggregatedAPI is a local API server as the aggregator sees it: a group
// version served by a process on 127.0.0.1:port behind Service
// namespace/service, whose serving certificate caPEM verifies.
type aggregatedAPI struct {
	group, version       string
	namespace, service   string
	port                 int
	caPEM                []byte
	groupPriorityMinimum int64
	versionPriority      int64
}

func (a aggregatedAPI) apiServiceName() string { return a.version + "." + a.group }
func (a aggregatedAPI) groupVersion() string   { return a.group + "/" + a.version }

// platformAPI describes the platform-apiserver's registration.
func (cp *ControlPlane) platformAPI() aggregatedAPI {
	return aggregatedAPI{
		group: PlatformGroup, version: PlatformVersion,
		namespace: platformNamespace, service: platformServiceName,
		port: cp.platformPort, caPEM: cp.pki.platformCA.certPEM,
		groupPriorityMinimum: 1000, versionPriority: 15,
	}
}

// registerPlatform creates the Namespace, the ExternalName Service and the
// APIService through which kube-apiserver proxies the platform group.
func (cp *ControlPlane) registerPlatform(ctx context.Context) error {
	if err := cp.registerAPI(ctx, cp.platformAPI()); err != nil {
		return err
	}
	cp.platformRegistered = true
	return nil
}

// registerAPI creates api's Namespace (if missing), its ExternalName Service
// and its APIService, or updates the APIService when it exists.
func (cp *ControlPlane) registerAPI(ctx context.Context, api aggregatedAPI) error {
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return fmt.Errorf("build kube-apiserver client: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: api.namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", api.namespace, err)
	}
	// Endpoints may not point at loopback, so the Service names localhost and
	// the aggregator dials localhost:<APIService port>.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: api.service, Namespace: api.namespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(api.port)}},
		},
	}
	if _, err := client.CoreV1().Services(api.namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service %s/%s: %w", api.namespace, api.service, err)
	}
	if err := cp.applyAPIService(ctx, api); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Registered an aggregated API", "apiService", api.apiServiceName(), "service", klog.KRef(api.namespace, api.service), "port", api.port)
	return nil
}

func (cp *ControlPlane) applyAPIService(ctx context.Context, api aggregatedAPI) error {
	dyn, err := dynamic.NewForConfig(cp.adminConfig)
	if err != nil {
		return fmt.Errorf("build dynamic client: %w", err)
	}
	name := api.apiServiceName()
	spec := map[string]any{
		"group":                api.group,
		"version":              api.version,
		"groupPriorityMinimum": api.groupPriorityMinimum,
		"versionPriority":      api.versionPriority,
		"service": map[string]any{
			"namespace": api.namespace,
			"name":      api.service,
			"port":      int64(api.port),
		},
		// The aggregator verifies the backend against this CA; never skip TLS verification.
		"caBundle": base64.StdEncoding.EncodeToString(api.caPEM),
	}
	apiServices := dyn.Resource(apiServiceGVR)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	_, err = apiServices.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := apiServices.Get(ctx, name, metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("get APIService %s: %w", name, getErr)
		}
		existing.Object["spec"] = spec
		_, err = apiServices.Update(ctx, existing, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("apply APIService %s: %w", name, err)
	}
	return nil
}

// waitPlatformServed waits until the platform group version is served
// through kube-apiserver.
func (cp *ControlPlane) waitPlatformServed(ctx context.Context) error {
	return cp.waitAPIServed(ctx, cp.platformAPI(), cp.platform, platformServedTimeout)
}

// waitAPIServed waits until api's APIService reports Available=True and
// kube-apiserver answers discovery for its group version, failing early when
// proc (the backend) exits.
func (cp *ControlPlane) waitAPIServed(ctx context.Context, api aggregatedAPI, proc *process, timeout time.Duration) error {
	dyn, err := dynamic.NewForConfig(cp.adminConfig)
	if err != nil {
		return fmt.Errorf("build dynamic client: %w", err)
	}
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return fmt.Errorf("build kube-apiserver client: %w", err)
	}
	name, gv := api.apiServiceName(), api.groupVersion()
	start := time.Now()
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if done, exitErr := proc.exited(); done {
			return false, fmt.Errorf("%s exited: %w", proc.spec.name, exitErr)
		}
		obj, err := dyn.Resource(apiServiceGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if ok, msg := apiServiceAvailable(obj); !ok {
			last = "APIService not Available: " + msg
			return false, nil
		}
		if _, err := client.Discovery().ServerResourcesForGroupVersion(gv); err != nil {
			last = "discovery of " + gv + " through kube-apiserver: " + err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be served through kube-apiserver: %w (last: %s); %s log %s ends:\n%s",
			gv, err, last, proc.spec.name, proc.logPath(), logTail(proc.logPath(), 30))
	}
	klog.FromContext(ctx).Info("Aggregated API served through kube-apiserver", "groupVersion", gv, "after", time.Since(start).Round(time.Millisecond))
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
