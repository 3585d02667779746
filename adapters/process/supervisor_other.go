//go:build !(linux && (amd64 || arm64))

package process

import (
	"context"
	"errors"
)

// SupervisorCommand is the hidden subcommand running ServeSupervisor.
const SupervisorCommand = "_supervisor"

// Supervisor needs Linux (a child subreaper, and forks without exec, on
// amd64 and arm64); elsewhere NewSupervisor returns nil and processes are
// started with os/exec, in process groups.
type Supervisor struct {
	// Protect is as on Linux; unused here.
	Protect func(pid int) (release func())
}

// NewSupervisor returns nil: no supervisor on this platform.
func NewSupervisor(string, ...string) *Supervisor { return nil }

// Start does nothing: there is no supervisor to start.
func (*Supervisor) Start() error { return nil }

// Close does nothing.
func (*Supervisor) Close() error { return nil }

func (*Supervisor) spawn(context.Context, *launch) (group, error) {
	return nil, errors.New("no process supervisor on this platform")
}

func (*Supervisor) supervisorPID() int { return 0 }

// ServeSupervisor is Linux only.
func ServeSupervisor() int { return 127 }
