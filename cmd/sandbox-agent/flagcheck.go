package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagMin is the annotation giving a numeric flag its smallest accepted
// value ("0" when absent): a count, a size or a duration below it is a
// usage error (exit 2), whichever command the flag belongs to, instead of
// a value the daemon would silently take for something else.
const flagMin = "sandbox-agent/min"

// setMin sets a numeric flag's smallest accepted value, e.g. "1" for a
// size where 0 means nothing, "-1" for a flag whose -1 means "automatic",
// "1ns" for a timeout that must be positive.
func setMin(fs *pflag.FlagSet, name, min string) {
	if err := fs.SetAnnotation(name, flagMin, []string{min}); err != nil {
		panic(err) // a programming mistake: the flag is not defined
	}
}

// checkNumericFlags refuses every numeric flag of fs below its minimum.
// pflag has already refused values that do not parse.
func checkNumericFlags(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		min := "0"
		if v := f.Annotations[flagMin]; len(v) > 0 {
			min = v[0]
		}
		switch f.Value.Type() {
		case "int", "int64", "int32":
			v, _ := strconv.ParseInt(f.Value.String(), 10, 64)
			if m, _ := strconv.ParseInt(min, 10, 64); v < m {
				err = usagef("--%s must be at least %d, got %d", f.Name, m, v)
			}
		case "duration":
			v, _ := time.ParseDuration(f.Value.String())
			if m, _ := time.ParseDuration(min); v < m {
				if m == time.Nanosecond {
					err = usagef("--%s must be positive, got %v", f.Name, v)
				} else {
					err = usagef("--%s must be at least %v, got %v", f.Name, m, v)
				}
			}
		}
	})
	return err
}

// checkPort accepts a port number, 0 (any free port) to 65535.
func checkPort(port string) error {
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return usagef("--port must be a number from 0 to 65535, got %q", port)
	}
	return nil
}

// listenError classifies a failure to listen: a host that does not
// resolve or an address that cannot be one is the command line's mistake
// (exit 2); a port in use or a permission refused is not (exit 1), and
// says what to do, since it is what a newcomer meets first (a daemon
// already running from an earlier try).
func listenError(err error, host, port string) error {
	var dns *net.DNSError
	var addr *net.AddrError
	if errors.As(err, &dns) || errors.As(err, &addr) {
		return usagef("--host: %v", err)
	}
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("listen: %s is already in use (another sandbox-agent? \"sandbox-agent daemon status --host %s --port %s\" tells): stop what listens there, or choose another --port (--port 0 picks a free one): %w",
			net.JoinHostPort(host, port), host, port, err)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("listen: %s needs privileges this user lacks (ports below 1024 do): choose a --port above 1023: %w",
			net.JoinHostPort(host, port), err)
	}
	return fmt.Errorf("listen: %w", err)
}

// flagError is a flag mistake as a usage error; an unknown long flag close
// to one of the command's own ("--prot") gets a "did you mean".
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		best, bestD := "", 3 // suggest within an edit distance of 2
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if d := editDistance(name, f.Name); d < bestD && !f.Hidden {
				best, bestD = f.Name, d
			}
		})
		if best != "" {
			msg += fmt.Sprintf(" (did you mean --%s?)", best)
		}
	}
	return usageError{msg}
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
