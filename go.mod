module github.com/stategate/stategate

go 1.25.0

require (
	github.com/extism/go-pdk v1.1.3
	github.com/tetratelabs/wazero v1.12.0
	github.com/tidwall/gjson v1.18.0
)

require (
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
	golang.org/x/sys v0.44.0 // indirect
)
