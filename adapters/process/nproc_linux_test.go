//go:build linux && (amd64 || arm64)

package process

import "testing"

// What leaders may start leaves the daemon a reserve of threads: a quarter
// of the limit, 16 to 256, never more than half.
func TestChildNprocReserve(t *testing.T) {
	for _, c := range []struct{ limit, want uint64 }{
		{2, 1}, {20, 10}, {32, 16}, {60, 44}, {100, 75}, {4096, 3840}, {96365, 96109},
	} {
		if got := childNprocOf(c.limit); got != c.want {
			t.Errorf("childNprocOf(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
}
