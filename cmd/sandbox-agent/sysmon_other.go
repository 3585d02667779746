//go:build !linux

package main

import "errors"

// Outside Linux nothing re-executes itself (see sysmon_linux.go): the
// runtime's default sysmon.

// sysmonAwake is never true here.
var sysmonAwake bool

func restoreGodebug() {}

func sysmonEnv(bool) (func(), bool) { return nil, false }

func keepSysmonAwake(bool) error { return nil }

func execSelf([]string, []string) error { return errors.New("exec: not on this platform") }
