package guest

import (
	"fmt"

	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/abi"
)

// Logf writes one line to the daemon's log at info level, tagged with the
// policy's name. Anything written to stdout or stderr is logged too, a line
// at a time; Logf adds a level and avoids the line splitting.
func Logf(format string, args ...any) { writeLog(abi.LevelInfo, fmt.Sprintf(format, args...)) }

// Warnf is Logf at warn level.
func Warnf(format string, args ...any) { writeLog(abi.LevelWarn, fmt.Sprintf(format, args...)) }

// Debugf is Logf at debug level.
func Debugf(format string, args ...any) { writeLog(abi.LevelDebug, fmt.Sprintf(format, args...)) }
