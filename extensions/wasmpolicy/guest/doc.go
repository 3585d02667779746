// Package guest is the SDK for writing sandbox-agent auth policies in Go.
//
// A policy is an ordinary Go main package that registers itself in init and
// is built as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o policy.wasm .
//
// The SDK provides the exports of the policy ABI (../ABI.md): it decodes the
// request, calls the registered Policy, and encodes its Decision. Policies
// stay plain Go, so their logic is unit-tested natively with go test; the
// exports exist only when building for wasip1.
package guest
