package main

import "testing"

func TestRelayProcs(t *testing.T) {
	for _, c := range []struct{ cpus, want int }{{1, 1}, {2, 1}, {3, 1}, {4, 2}, {16, 8}} {
		if got := relayProcs(c.cpus); got != c.want {
			t.Errorf("relayProcs(%d) = %d, want %d", c.cpus, got, c.want)
		}
	}
}
