package framework

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestOwnedFields(t *testing.T) {
	var obj, set, want map[string]any
	for _, j := range []struct {
		into *map[string]any
		text string
	}{
		{&obj, `{"status":{"clusterName":"a","admission":{"clusterQueue":"cq","podSetAssignments":[{"name":"main"}]},
			"conditions":[{"type":"QuotaReserved","status":"True"},{"type":"Finished","status":"False"}],
			"tags":["x","y"],"other":1}}`},
		{&set, `{"f:status":{"f:admission":{".":{},"f:clusterQueue":{},"f:podSetAssignments":{}},
			"f:conditions":{"k:{\"type\":\"QuotaReserved\"}":{".":{},"f:type":{},"f:status":{}}},
			"f:tags":{"v:\"y\"":{}},"f:missing":{}}}`},
		{&want, `{"status":{"admission":{"clusterQueue":"cq","podSetAssignments":[{"name":"main"}]},
			"conditions":[{"type":"QuotaReserved","status":"True"}],"tags":["y"]}}`},
	} {
		if err := json.Unmarshal([]byte(j.text), j.into); err != nil {
			t.Fatal(err)
		}
	}
	if got := ownedFields(obj, set); !reflect.DeepEqual(got, want) {
		t.Errorf("ownedFields = %v, want %v", got, want)
	}
}
