// Package wasmpolicy runs operator-written auth policies, compiled to
// WebAssembly, inside the daemon with wazero. It implements
// ports.Authorizer: after the bearer check, the HTTP adapter describes each
// request as a domain.AuthRequest and a Set of policies answers allow, or
// deny with a status and a message.
//
// Policies are sandboxed code the daemon does not trust to be fast or
// correct: each call has a time limit, each instance a memory limit, an
// instance that trapped or ran out of time is thrown away, and a policy that
// fails denies (or, with fail=open, abstains). The ABI between host and
// module is in ABI.md; package guest is the Go SDK for writing policies.
package wasmpolicy
