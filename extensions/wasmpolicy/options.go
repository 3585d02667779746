package wasmpolicy

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Defaults for a policy's limits.
const (
	DefaultCallTimeout = 25 * time.Millisecond
	DefaultInitTimeout = 5 * time.Second
	DefaultMemoryMiB   = 64
)

// Spec is one --policy flag: a module and how to run it.
type Spec struct {
	// Name tags the policy's log lines and errors (default: the file's base
	// name without .wasm).
	Name string
	// Path is the .wasm file.
	Path string
	// ConfigPath is the JSON file given to the policy at load ("" = none).
	ConfigPath string
	// Config is the configuration document itself; when nil and ConfigPath
	// is set, Load reads the file.
	Config []byte
	// FailOpen makes a failing policy (trap, timeout, bad answer) abstain
	// instead of denying.
	FailOpen bool
	// CallTimeout bounds one decision (DefaultCallTimeout).
	CallTimeout time.Duration
	// InitTimeout bounds creating one instance: runtime start-up and the
	// policy's configuration (DefaultInitTimeout).
	InitTimeout time.Duration
	// MemoryMiB caps the linear memory of each instance (DefaultMemoryMiB).
	MemoryMiB int
	// Instances caps how many instances serve calls at once (default twice
	// GOMAXPROCS, at least 2).
	Instances int
	// NoCache turns off the decision cache for this policy, whatever the
	// module declares (cache=off): for an operator who does not trust a
	// module's promise that its decisions are pure.
	NoCache bool
}

func (s *Spec) fill() {
	if s.Name == "" {
		base := s.Path[strings.LastIndexAny(s.Path, `/\`)+1:]
		s.Name = strings.TrimSuffix(base, ".wasm")
	}
	s.CallTimeout = cmp.Or(max(s.CallTimeout, 0), DefaultCallTimeout)
	s.InitTimeout = cmp.Or(max(s.InitTimeout, 0), DefaultInitTimeout)
	s.MemoryMiB = cmp.Or(max(s.MemoryMiB, 0), DefaultMemoryMiB)
	s.Instances = cmp.Or(max(s.Instances, 0), max(2, 2*runtime.GOMAXPROCS(0)))
}

// config returns the configuration document, reading ConfigPath through
// h if needed.
func (s *Spec) config(ctx context.Context, h *Host) ([]byte, error) {
	if s.Config != nil || s.ConfigPath == "" {
		return s.Config, nil
	}
	b, err := h.read(ctx, s.ConfigPath, MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return b, nil
}

// ParseSpec parses the value of --policy:
//
//	FILE[,config=FILE][,fail=open|closed][,name=NAME][,timeout=DURATION][,memory=MiB][,instances=N][,cache=on|off]
func ParseSpec(v string) (Spec, error) {
	parts := strings.Split(v, ",")
	s := Spec{Path: strings.TrimSpace(parts[0])}
	if s.Path == "" {
		return s, fmt.Errorf("policy %q: missing the .wasm file", v)
	}
	for _, p := range parts[1:] {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || val == "" {
			return s, fmt.Errorf("policy %q: option %q must be key=value", v, p)
		}
		var err error
		switch k {
		case "config":
			s.ConfigPath = val
		case "name":
			s.Name = val
		case "fail":
			switch val {
			case "open":
				s.FailOpen = true
			case "closed", "deny":
				s.FailOpen = false
			default:
				err = fmt.Errorf("must be open or closed")
			}
		case "timeout":
			s.CallTimeout, err = time.ParseDuration(val)
			if err == nil && s.CallTimeout <= 0 {
				err = fmt.Errorf("must be positive")
			}
		case "memory":
			s.MemoryMiB, err = strconv.Atoi(strings.TrimSuffix(strings.TrimSuffix(val, "MiB"), "M"))
			if err == nil && (s.MemoryMiB <= 0 || s.MemoryMiB > 4096) {
				err = fmt.Errorf("must be between 1 and 4096 MiB")
			}
		case "instances":
			s.Instances, err = strconv.Atoi(val)
			if err == nil && s.Instances <= 0 {
				err = fmt.Errorf("must be positive")
			}
		case "cache":
			switch val {
			case "on":
				s.NoCache = false
			case "off":
				s.NoCache = true
			default:
				err = fmt.Errorf("must be on or off")
			}
		default:
			err = fmt.Errorf("unknown option (want config, fail, name, timeout, memory, instances or cache)")
		}
		if err != nil {
			return s, fmt.Errorf("policy %q: %s: %w", v, k, err)
		}
	}
	return s, nil
}
