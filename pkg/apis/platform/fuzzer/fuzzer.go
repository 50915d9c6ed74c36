// Package fuzzer holds fuzzer functions for the platform.example.io round-trip test.
package fuzzer

import (
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
)

// Funcs returns the fuzzer functions for the group; the types need none
// beyond the defaults.
var Funcs = func(codecs runtimeserializer.CodecFactory) []any {
	return nil
}
