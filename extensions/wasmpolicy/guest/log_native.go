//go:build !wasip1

package guest

import (
	"fmt"
	"os"
)

// writeLog prints to stderr when a policy runs natively (in its unit tests).
func writeLog(level int, msg string) { fmt.Fprintf(os.Stderr, "policy log level=%d: %s\n", level, msg) }
