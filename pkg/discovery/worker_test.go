package discovery

import (
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestWorkerState(t *testing.T) {
	tests := []struct {
		name string
		set  func(a, b *syncer)
		want store.MemberState
	}{
		{name: "first sync running", set: func(a, b *syncer) { a.synced = true }, want: store.MemberSyncing},
		{name: "all synced", set: func(a, b *syncer) { a.synced, b.synced = true, true }, want: store.MemberSynced},
		{name: "one unreachable", set: func(a, b *syncer) { a.synced, b.synced, b.unreachable = true, true, true }, want: store.MemberUnreachable},
		{name: "stuck beats unreachable", set: func(a, b *syncer) { a.unreachable, b.stuck = true, true }, want: store.MemberLagging},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newSyncer(syncerParams{Clock: clock.RealClock{}}), newSyncer(syncerParams{Clock: clock.RealClock{}})
			tt.set(a, b)
			w := &worker{syncers: []*syncer{a, b}}
			if got := w.state(); got != tt.want {
				t.Errorf("state = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestPreferProtobuf: member clients ask for protobuf first and still read
// a server that answers JSON.
func TestPreferProtobuf(t *testing.T) {
	var accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept = r.Header.Get("Accept")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"n1"}}]}`))
	}))
	defer srv.Close()
	rc := &rest.Config{Host: srv.URL}
	preferProtobuf(rc)
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list from a JSON-only server: %v", err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].Name != "n1" || nodes.ResourceVersion != "7" {
		t.Errorf("listed %+v, want node n1 at resourceVersion 7", nodes)
	}
	if want := "application/vnd.kubernetes.protobuf,application/json"; accept != want {
		t.Errorf("Accept = %q, want %q", accept, want)
	}
	kept := &rest.Config{ContentConfig: rest.ContentConfig{AcceptContentTypes: "application/json", ContentType: "application/json"}}
	preferProtobuf(kept)
	if kept.AcceptContentTypes != "application/json" || kept.ContentType != "application/json" {
		t.Errorf("content types the config already had were replaced: %q, %q", kept.AcceptContentTypes, kept.ContentType)
	}
}
