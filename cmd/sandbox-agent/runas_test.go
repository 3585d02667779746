package main

import (
	"slices"
	"testing"
)

// The run-as user's environment: its HOME, USER and LOGNAME, none of the
// daemon's own XDG directories, everything else kept.
func TestRunAsEnv(t *testing.T) {
	r := &runAs{name: "agent", home: "/home/agent"}
	got := r.env([]string{"HOME=/root", "USER=root", "LOGNAME=root", "XDG_DATA_HOME=/root/.local/share", "XDG_RUNTIME_DIR=/run/user/0", "PATH=/usr/bin", "LANG=C.UTF-8"})
	slices.Sort(got)
	want := []string{"HOME=/home/agent", "LANG=C.UTF-8", "LOGNAME=agent", "PATH=/usr/bin", "USER=agent"}
	if !slices.Equal(got, want) {
		t.Errorf("env = %q, want %q", got, want)
	}
	var none *runAs
	if base := []string{"HOME=/root"}; !slices.Equal(none.env(base), base) || none.credential() != nil || none.workDir() != "" {
		t.Error("without --run-as the environment, credential or directory changed")
	}
	if r, err := resolveRunAs(""); r != nil || err != nil {
		t.Errorf("resolveRunAs(\"\") = %v, %v", r, err)
	}
}
