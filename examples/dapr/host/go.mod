// The Dapr wasm middleware host of the tests in examples/dapr: a module of its own, so that
// components-contrib's dependencies stay out of stategate's go.mod.
module github.com/stategate/stategate/examples/dapr/host

go 1.24.4

require (
	github.com/dapr/components-contrib v1.16.1
	github.com/dapr/kit v0.16.1
)

require (
	github.com/fxamacker/cbor/v2 v2.7.0 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/http-wasm/http-wasm-host-go v0.6.0 // indirect
	github.com/mitchellh/mapstructure v1.5.1-0.20220423185008-bf980b35cac4 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	github.com/spf13/cast v1.8.0 // indirect
	github.com/tetratelabs/wazero v1.7.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/sys v0.33.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	k8s.io/apimachinery v0.33.0 // indirect
)
