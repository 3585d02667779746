package exits

import (
	"cmp"
	"sort"
	"strconv"
	"sync"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// ExitKey labels an exit: its exit code, or the signal that ended it.
type ExitKey struct {
	Code   string // decimal exit code; "" when a signal ended the process
	Signal string // signal name; "" for a normal exit
}

// ExitCount is how many processes ended one way.
type ExitCount struct {
	ExitKey
	Count uint64
}

// Counter counts exits by ExitKey. Exits are rare, so a small lock is
// enough. The zero value is ready to use.
type Counter struct {
	mu sync.Mutex
	m  map[ExitKey]uint64
}

// Add counts one exit. An exit with neither a code nor a signal name is
// counted under the signal "unknown".
func (c *Counter) Add(st domain.ExitStatus) {
	var k ExitKey
	if st.Code != nil {
		k.Code = strconv.Itoa(*st.Code)
	} else {
		k.Signal = st.Signal
		k.Signal = cmp.Or(k.Signal, "unknown")
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[ExitKey]uint64{}
	}
	c.m[k]++
	c.mu.Unlock()
}

// Snapshot returns the counts sorted by code, then signal (nil when none).
func (c *Counter) Snapshot() []ExitCount {
	c.mu.Lock()
	var out []ExitCount
	for k, n := range c.m {
		out = append(out, ExitCount{ExitKey: k, Count: n})
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Signal < b.Signal
	})
	return out
}
