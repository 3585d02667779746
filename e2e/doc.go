// Package e2e holds black-box tests against the built sandbox-agent binary:
// TestMain builds it once, each test starts it on a port the kernel picks and
// drives it over HTTP (both through e2e/internal/harness, which e2e/cmd/soak
// shares), and the compatibility tests run the official TypeScript clients
// (pinned by package-lock.json, installed with npm ci) against it.
//
// It imports nothing of the daemon's packages except domain-free helpers:
// what it checks is what a user of the binary sees.
package e2e
