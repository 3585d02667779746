package main

import "testing"

func TestGodebugHas(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"", false},
		{"schedtrace=0", true},
		{"gctrace=1,schedtrace=10", true},
		{"scheddetail=1", false},
		{"schedtrace", false},        // no value: the runtime ignores it
		{" schedtrace=1", false},     // the runtime reads the key as written
		{"xschedtrace=1,a=b", false}, // another key
	} {
		if got := godebugHas(tc.v, "schedtrace"); got != tc.want {
			t.Errorf("godebugHas(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}
