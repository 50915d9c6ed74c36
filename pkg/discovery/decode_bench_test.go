package discovery

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// BenchmarkDecodePodPage decodes one relist page (listPageSize pods shaped
// like the fleet benchmark's kwok pods) as the member client does, in JSON
// and in protobuf (preferProtobuf), side by side:
//
//	go test -run '^$' -bench DecodePodPage -benchmem ./pkg/discovery/
func BenchmarkDecodePodPage(b *testing.B) {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "60933"}}
	for i := range listPageSize {
		list.Items = append(list.Items, benchPod(i))
	}
	for _, s := range []struct {
		name string
		ser  runtime.Serializer
	}{
		{"json", json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})},
		{"protobuf", protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)},
	} {
		data, err := runtime.Encode(s.ser, list)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				into := &corev1.PodList{}
				if _, _, err := s.ser.Decode(data, nil, into); err != nil {
					b.Fatal(err)
				}
				if len(into.Items) != listPageSize {
					b.Fatalf("decoded %d pods, want %d", len(into.Items), listPageSize)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*listPageSize), "ns/pod")
			b.ReportMetric(float64(len(data))/listPageSize, "B/pod-encoded")
		})
	}
}

// benchPod is a running pod of a Deployment, with what kwok and the
// scheduler give it.
func benchPod(i int) corev1.Pod {
	start := metav1.Unix(1764900000, 0)
	name := fmt.Sprintf("app-%04d-7d9c8b6f5-%05d", i/4, i)
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: fmt.Sprintf("team-%03d", i%200), UID: types.UID(fmt.Sprintf("0f61d8eb-090f-496c-8f61-%012d", i)),
			ResourceVersion: "60000", CreationTimestamp: start,
			Labels: map[string]string{"app": fmt.Sprintf("app-%04d", i/4), "pod-template-hash": "7d9c8b6f5", "tier": "backend"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app-7d9c8b6f5",
				UID: "b8f3f3af-d6ba-4c1e-9f61-0f61d8eb090f", Controller: new(true), BlockOwnerDeletion: new(true)}},
		},
		Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("kwok-node-%d", i%5000), SchedulerName: "default-scheduler", RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.io/team/app:1.2.3",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
				},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
				{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: fmt.Sprintf("10.%d.%d.%d", i/65536%256, i/256%256, i%256), StartTime: &start,
			QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: start},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: start},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: start},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: start},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example.io/team/app:1.2.3",
				ImageID: "registry.example.io/team/app@sha256:0f61d8eb090f496c8f61b8f3f3afd6ba", Started: new(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}}},
		},
	}
}
