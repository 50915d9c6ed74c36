package store

import (
	"errors"
	"strings"
	"testing"
)

func TestUnschedulableReason(t *testing.T) {
	noSchedule := []Taint{{Key: "dedicated", Effect: "NoSchedule"}}
	tests := []struct {
		name string
		node Node
		want string
	}{
		{"schedulable", Node{Ready: true}, ""},
		{"PreferNoSchedule does not count", Node{Ready: true, Taints: []Taint{{Key: "x", Effect: "PreferNoSchedule"}}}, ""},
		{"not ready", Node{}, ReasonNotReady},
		{"cordoned", Node{Ready: true, Unschedulable: true}, ReasonCordoned},
		{"NoSchedule", Node{Ready: true, Taints: noSchedule}, ReasonTainted},
		{"NoExecute after PreferNoSchedule", Node{Ready: true, Taints: []Taint{{Key: "x", Effect: "PreferNoSchedule"}, {Key: "y", Effect: "NoExecute"}}}, ReasonTainted},
		{"not ready before cordoned and tainted", Node{Unschedulable: true, Taints: noSchedule}, ReasonNotReady},
		{"cordoned before tainted", Node{Ready: true, Unschedulable: true, Taints: noSchedule}, ReasonCordoned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.node.UnschedulableReason(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidateValue(t *testing.T) {
	reason := FieldColumns{Path: "status.unschedulableReason", Columns: []string{"unschedulable_reason"}, Values: []string{"", ReasonNotReady, ReasonCordoned, ReasonTainted}}
	flag := FieldColumns{Path: "status.ready", Columns: []string{"ready"}, Bool: true}
	tests := []struct {
		name    string
		req     FieldRequirement
		wantErr string
	}{
		{"listed value", FieldRequirement{Field: reason, Value: ReasonCordoned}, ""},
		{"empty value listed", FieldRequirement{Field: reason, Value: ""}, ""},
		{"unlisted value", FieldRequirement{Field: reason, Value: "cordoned"}, `field selector status.unschedulableReason: value "cordoned" is not one of "", "NotReady", "Cordoned", "Tainted"`},
		{"bool", FieldRequirement{Field: flag, Value: "false"}, ""},
		{"not a bool", FieldRequirement{Field: flag, Value: "yes"}, `value "yes" is not "true" or "false"`},
		{"free text", FieldRequirement{Field: FieldColumns{Path: "status.cluster", Columns: []string{"cluster_id"}}, Value: "anything"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.ValidateValue()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.wantErr != "" && (!errors.Is(err, ErrInvalidSelector) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want ErrInvalidSelector with %q", err, tt.wantErr)
			}
		})
	}
}
