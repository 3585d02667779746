// Package wasmpolicy runs operator-written auth policies, compiled to
// WebAssembly, inside the daemon with wazero. It implements
// ports.Authorizer, the policy part of the auth chain (app/authz): the
// daemon describes each request as a domain.AuthRequest (with the action
// it decided) and a Set of policies answers, in order, deny (with a status
// and a message), grant (with a principal) or pass; the built-in token
// check comes after.
//
// Policies are sandboxed code the daemon does not trust to be fast or
// correct: each call has a time limit, each instance a memory limit, an
// instance that trapped or ran out of time is thrown away, and a policy that
// fails denies (or, with fail=open, passes). The ABI between host and
// module is in ABI.md; package guest is the Go SDK for writing policies.
package wasmpolicy
