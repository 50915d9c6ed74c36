package registry

import (
	"maps"
	"strconv"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/platform-apiserver/pkg/apis/platform"
)

// ViewMeta describes the member object behind a view object.
type ViewMeta struct {
	Namespace, Name string
	// UIDSpace and UIDKey make a stable name-based UID that differs from the
	// member object's own.
	UIDSpace uuid.UUID
	UIDKey   string
	// Labels are the member object's; the cluster label is added.
	Labels          map[string]string
	ClusterID       string
	CreatedAt       time.Time // the member's creation time; FirstSeen when unknown
	FirstSeen       time.Time
	ResourceVersion int64
}

// ObjectMeta is the metadata every view object carries.
func (v ViewMeta) ObjectMeta() metav1.ObjectMeta {
	labels := make(map[string]string, len(v.Labels)+1)
	maps.Copy(labels, v.Labels)
	labels[platform.ClusterLabel] = v.ClusterID
	created := v.CreatedAt
	if created.IsZero() {
		created = v.FirstSeen
	}
	return metav1.ObjectMeta{
		Namespace:         v.Namespace,
		Name:              v.Name,
		UID:               types.UID(uuid.NewSHA1(v.UIDSpace, []byte(v.UIDKey)).String()),
		ResourceVersion:   strconv.FormatInt(v.ResourceVersion, 10),
		CreationTimestamp: metav1.NewTime(created),
		Labels:            labels,
	}
}
