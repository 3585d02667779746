// Package abi holds the names, numbers and record layouts of the policy
// ABI, shared by the host (package wasmpolicy) and the guest SDK (package
// guest) so the two cannot drift apart. ../ABI.md is the contract for
// authors of guests in any language.
package abi
