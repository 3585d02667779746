package domain

// LaunchSpec is everything needed to start an agent process. Env holds only
// the variables the agent adds to the daemon's filtered environment.
type LaunchSpec struct {
	Agent   string
	Command string
	Args    []string
	Env     map[string]string
	Dir     string // working directory; empty means the daemon's
	Source  string // how the command was found: builtin, launcher, operator, ...
}

// ExitStatus is how an agent process ended. Code is nil when it was killed
// by a signal (then Signal names it).
type ExitStatus struct {
	Code   *int
	Signal string
}

// Success reports a zero exit code.
func (s ExitStatus) Success() bool { return s.Code != nil && *s.Code == 0 }

// OperatorAgent is an agent the operator defined in the agents file: any
// ACP agent, started with a fixed command line.
type OperatorAgent struct {
	ID      string            `json:"id"`
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}
