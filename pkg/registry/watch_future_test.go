package registry_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/registry/feed/feedtest"
)

// TestFutureResourceVersion: a watch or list from a resourceVersion the
// registry has not reached waits for it briefly, as kube-apiserver's watch
// cache does, and then answers 504 "Too large resource version" with
// Retry-After; one reached during the wait is served, and a watch never
// claims a version the registry has not reached.
func TestFutureResourceVersion(t *testing.T) {
	mem := feedtest.New()
	f := follow(t, mem)
	r, _ := widgetREST(mem, f)
	mem.Put(widgetNode("c1", "a", true))
	now := mem.ResourceVersion()

	t.Run("never reached", func(t *testing.T) {
		future := strconv.FormatInt(now+1000, 10)
		for name, call := range map[string]func() error{
			"watch": func() error {
				_, err := r.Watch(t.Context(), &metainternalversion.ListOptions{ResourceVersion: future, AllowWatchBookmarks: true})
				return err
			},
			"watch with initial events": func() error {
				_, err := r.Watch(t.Context(), &metainternalversion.ListOptions{ResourceVersion: future, SendInitialEvents: new(true),
					ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
				return err
			},
			"list": func() error {
				_, err := r.List(t.Context(), &metainternalversion.ListOptions{ResourceVersion: future})
				return err
			},
		} {
			start := time.Now()
			err := call()
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("%s: %v, want a 504", name, err)
			}
			s := status.Status()
			if s.Code != http.StatusGatewayTimeout || s.Reason != metav1.StatusReasonTimeout || s.Details == nil || s.Details.RetryAfterSeconds != 1 ||
				!apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
				t.Errorf("%s: %+v, want 504 Timeout, Retry-After 1 and cause %s", name, s, metav1.CauseTypeResourceVersionTooLarge)
			}
			if waited := time.Since(start); waited < 2*time.Second || waited > 10*time.Second {
				t.Errorf("%s: answered after %s, want about 3s (kube-apiserver's watch cache)", name, waited)
			}
		}
	})

	t.Run("reached while waiting", func(t *testing.T) {
		next := mem.ResourceVersion() + 1
		go func() {
			// Once the watch waits for the version.
			_ = wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return f.Waiting() > 0, nil
			})
			mem.Put(widgetNode("c1", "b", true))
			mem.Put(widgetNode("c1", "c", true))
		}()
		w, err := r.Watch(t.Context(), &metainternalversion.ListOptions{ResourceVersion: strconv.FormatInt(next, 10)})
		if err != nil {
			t.Fatalf("watch from %d: %v", next, err)
		}
		defer w.Stop()
		select {
		case ev := <-w.ResultChan():
			obj := ev.Object
			if co, ok := obj.(runtime.CacheableObject); ok {
				obj = co.GetObject()
			}
			if wd, ok := obj.(*Widget); ev.Type != watch.Added || !ok || wd.Name != "c1.c" || wd.ResourceVersion != strconv.FormatInt(next+1, 10) {
				t.Errorf("first event %s %+v, want ADDED c1.c at %d (after the version asked)", ev.Type, obj, next+1)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
		mem.Put(widgetNode("c1", "d", true))
		list, err := r.List(t.Context(), &metainternalversion.ListOptions{ResourceVersion: strconv.FormatInt(mem.ResourceVersion(), 10)})
		if err != nil {
			t.Fatalf("list at the newest version: %v", err)
		}
		if n := len(list.(*WidgetList).Items); n != 4 {
			t.Errorf("list: %d items, want 4", n)
		}
	})
}
