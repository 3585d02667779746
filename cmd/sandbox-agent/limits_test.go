package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/app/processes"
)

func parseLimits(t *testing.T, args ...string) (*limitFlags, error) {
	t.Helper()
	var l limitFlags
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	l.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &l, l.validate()
}

// The memory bound the README states at the defaults is the one the
// daemon gives the runtime, and the process budgets reach the service.
func TestLimitFlags(t *testing.T) {
	l, err := parseLimits(t)
	if err != nil {
		t.Fatal(err)
	}
	if got := memoryBound(l.inflightBytes, l.replayTotal, l.processLogTotal, l.maxInstances, l.maxConns); got != 1252<<20 {
		t.Errorf("memory bound at the defaults %d MiB, the README says 1252", got>>20)
	}
	var opts processes.Options
	l.applyProcesses(&opts)
	if opts.LogTotal != processes.DefaultLogTotal || opts.Ceiling.MaxLogBytesPerProcess != processes.DefaultCeiling().MaxLogBytesPerProcess ||
		opts.Ceiling.MaxRunTimeoutMs != processes.DefaultCeiling().MaxRunTimeoutMs {
		t.Errorf("defaults: %+v", opts)
	}
	l, err = parseLimits(t, "--process-log-total", "1048576", "--process-max-log-bytes", "4096", "--process-max-run-timeout", "2s")
	if err != nil {
		t.Fatal(err)
	}
	l.applyProcesses(&opts)
	if opts.LogTotal != 1<<20 || opts.Ceiling.MaxLogBytesPerProcess != 4096 || opts.Ceiling.MaxRunTimeoutMs != 2000 {
		t.Errorf("set: %+v", opts)
	}
	// A ceiling below a default lowers the default.
	if c := processes.New(nil, opts).Config(); c.MaxLogBytesPerProcess != 4096 || c.MaxRunTimeoutMs != 2000 {
		t.Errorf("initial config under lowered ceilings: %+v", c)
	}
	for _, bad := range [][]string{
		{"--process-log-total", "0"}, {"--process-max-concurrent", "0"}, {"--process-max-input-bytes", "-1"}, {"--process-max-run-timeout", "0s"},
	} {
		if _, err := parseLimits(t, bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
