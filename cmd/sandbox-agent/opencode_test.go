package main

import (
	"slices"
	"strings"
	"testing"
)

func TestOpenCodeEnv(t *testing.T) {
	got := openCodeEnv([]string{"PATH=/bin"}, "tok")
	if !slices.Contains(got, "OPENCODE_DISABLE_MODELS_FETCH=1") || !slices.Contains(got, "OPENCODE_SERVER_PASSWORD=tok") {
		t.Errorf("env %v", got)
	}
	got = openCodeEnv([]string{"OPENCODE_DISABLE_MODELS_FETCH=0"}, "")
	if slices.Contains(got, "OPENCODE_DISABLE_MODELS_FETCH=1") || strings.Contains(strings.Join(got, " "), "PASSWORD") {
		t.Errorf("the user's choice is kept, no password without a token: %v", got)
	}
}

func TestOpenCodeFlagsValidate(t *testing.T) {
	for _, tc := range []struct {
		f   openCodeFlags
		bad bool
	}{
		{openCodeFlags{agent: "mock", maxDB: 1 << 20}, false},
		{openCodeFlags{agent: "../x", maxDB: 1 << 20}, true},
		{openCodeFlags{agent: "mock", maxDB: 1}, true},
		{openCodeFlags{agent: "mock", maxDB: 1 << 20, retention: -1}, true},
		{openCodeFlags{disabled: true, agent: "../x"}, false},
	} {
		if err := tc.f.validate(); (err != nil) != tc.bad {
			t.Errorf("%+v: %v", tc.f, err)
		}
	}
}
