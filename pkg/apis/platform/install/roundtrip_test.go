package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"

	platformfuzzer "github.com/example/platform-apiserver/pkg/apis/platform/fuzzer"
)

func TestRoundTripTypes(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, Install, platformfuzzer.Funcs)
}
