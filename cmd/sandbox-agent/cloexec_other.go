//go:build !linux

package main

// closeInheritedOnExec is wired up on Linux only.
func closeInheritedOnExec() {}
