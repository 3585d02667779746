//go:build !linux

package main

// keepSysmonAwake does nothing outside Linux (see sysmon_linux.go).
func keepSysmonAwake() error { return nil }
