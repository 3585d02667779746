package domain

// The values of the processes API (/v1/processes). Their JSON shapes are the
// TypeScript SDK 0.4.2's (schemas Process* of its index.d.ts); the Go names
// are the SDK's schema names, so the OpenAPI document names them alike.

// ProcessSpec is everything needed to start a user process. Env holds only
// what the caller adds to the daemon's filtered environment.
type ProcessSpec struct {
	Command string
	Args    []string
	Env     map[string]string
	Dir     string // working directory, already resolved; empty means the daemon's
	TTY     bool   // run on a pseudo-terminal (stdin, stdout and stderr are the PTY)
	Stdin   bool   // keep a stdin pipe open (pipe mode); without it stdin is /dev/null
	Cols    uint16 // initial terminal size (TTY only)
	Rows    uint16
}

// Signal is what the API may send to a process group.
type Signal string

// The signals the API sends.
const (
	SignalTerm Signal = "SIGTERM"
	SignalKill Signal = "SIGKILL"
)

// ProcessState is a managed process's state.
type ProcessState string

// The process states of the SDK.
const (
	ProcessRunning ProcessState = "running"
	ProcessExited  ProcessState = "exited"
)

// ProcessOwner says who started a process. Every process started through
// the API is the user's; the others exist for the SDK's listing filter.
type ProcessOwner string

// The owners of the SDK.
const (
	OwnerUser    ProcessOwner = "user"
	OwnerDesktop ProcessOwner = "desktop"
	OwnerSystem  ProcessOwner = "system"
)

// ValidOwner reports whether o is one of the SDK's owners.
func ValidOwner(o ProcessOwner) bool {
	return o == OwnerUser || o == OwnerDesktop || o == OwnerSystem
}

// ProcessInfo describes a managed process (running or exited).
type ProcessInfo struct {
	ID          string       `json:"id"`
	Command     string       `json:"command"`
	Args        []string     `json:"args"`
	Cwd         *string      `json:"cwd,omitempty"`
	TTY         bool         `json:"tty"`
	Interactive bool         `json:"interactive"`
	Owner       ProcessOwner `json:"owner"`
	Status      ProcessState `json:"status" enum:"running,exited"`
	PID         *int         `json:"pid,omitempty"`
	ExitCode    *int         `json:"exitCode,omitempty"`
	// Signal names the signal that ended the process (then ExitCode is
	// absent). Beyond the SDK's schema.
	Signal      string `json:"signal,omitempty"`
	CreatedAtMs int64  `json:"createdAtMs"`
	ExitedAtMs  *int64 `json:"exitedAtMs,omitempty"`
}

// ProcessConfig is the runtime configuration of the processes API: its
// limits, which POST /v1/processes/config replaces as a whole. A negative
// value is refused as a value of the wrong type (422), as the reference's
// unsigned fields refuse it; zero passes the schema and is refused by the
// service's own check (400), as there.
type ProcessConfig struct {
	_                       struct{} `json:"-" additionalProperties:"true"` // unknown fields are ignored, as the reference does
	MaxConcurrentProcesses  int      `json:"maxConcurrentProcesses" minimum:"0" doc:"Processes (managed and runs) alive at once; one more is refused with 429."`
	DefaultRunTimeoutMs     int64    `json:"defaultRunTimeoutMs" minimum:"0" doc:"Timeout of a run that names none."`
	MaxRunTimeoutMs         int64    `json:"maxRunTimeoutMs" minimum:"0" doc:"Upper bound of a run's timeout."`
	MaxOutputBytes          int      `json:"maxOutputBytes" minimum:"0" doc:"Bytes of stdout and of stderr a run keeps (then *Truncated)."`
	MaxLogBytesPerProcess   int      `json:"maxLogBytesPerProcess" minimum:"0" doc:"Bytes of recent output kept per managed process (older output is evicted)."`
	MaxInputBytesPerRequest int      `json:"maxInputBytesPerRequest" minimum:"0" doc:"Largest decoded input of one request or terminal frame (413 past it)."`
}

// DefaultProcessConfig is the reference's configuration.
func DefaultProcessConfig() ProcessConfig {
	return ProcessConfig{
		MaxConcurrentProcesses:  64,
		DefaultRunTimeoutMs:     30_000,
		MaxRunTimeoutMs:         300_000,
		MaxOutputBytes:          1 << 20,
		MaxLogBytesPerProcess:   10 << 20,
		MaxInputBytesPerRequest: 64 << 10,
	}
}

// ProcessCreateRequest starts a long-lived process.
type ProcessCreateRequest struct {
	_           struct{}          `json:"-" additionalProperties:"true"` // unknown fields are ignored, as the reference does
	Command     string            `json:"command"`
	Args        []string          `json:"args,omitempty"`
	Cwd         *string           `json:"cwd,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Interactive bool              `json:"interactive,omitempty" doc:"Keep stdin open for input (pipe mode)."`
	TTY         bool              `json:"tty,omitempty" doc:"Run on a pseudo-terminal."`
}

// ProcessRunRequest runs a command to completion.
type ProcessRunRequest struct {
	_              struct{}          `json:"-" additionalProperties:"true"` // unknown fields are ignored, as the reference does
	Command        string            `json:"command"`
	Args           []string          `json:"args,omitempty"`
	Cwd            *string           `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	MaxOutputBytes *int              `json:"maxOutputBytes,omitempty" doc:"Bytes of each stream to keep, at most the configured maxOutputBytes."`
	TimeoutMs      *int64            `json:"timeoutMs,omitempty" doc:"Kill the process group after this long, at most the configured maxRunTimeoutMs."`
}

// ProcessRunResponse is how a run ended and what it wrote.
type ProcessRunResponse struct {
	// ExitCode is null when a signal ended the run (a timeout included),
	// present as the reference sends it: a client may test it for null.
	ExitCode        *int   `json:"exitCode" required:"false" nullable:"true"`
	Signal          string `json:"signal,omitempty" doc:"The signal that ended the process (beyond the SDK's schema)."`
	TimedOut        bool   `json:"timedOut"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdoutTruncated"`
	StderrTruncated bool   `json:"stderrTruncated"`
	DurationMs      int64  `json:"durationMs"`
}

// ProcessLogsStream selects log entries: one stream, stdout and stderr
// together (combined), or a terminal's output (pty).
type ProcessLogsStream string

// The log streams of the SDK.
const (
	StreamStdout   ProcessLogsStream = "stdout"
	StreamStderr   ProcessLogsStream = "stderr"
	StreamCombined ProcessLogsStream = "combined"
	StreamPTY      ProcessLogsStream = "pty"
)

// Matches reports whether an entry of stream s is selected by filter f.
func (f ProcessLogsStream) Matches(s ProcessLogsStream) bool {
	if f == StreamCombined {
		return s == StreamStdout || s == StreamStderr
	}
	return f == s
}

// LogEncoding is how a log entry's Data carries the output's bytes.
type LogEncoding string

// The log encodings: base64 (the default, as the reference sends it: output
// is bytes, not necessarily text) and utf8 (text for people reading with
// curl; bytes that are not UTF-8 become U+FFFD).
const (
	LogBase64 LogEncoding = "base64"
	LogUTF8   LogEncoding = "utf8"
)

// ProcessLogEntry is one chunk of a process's output. Data is base64, as
// the reference sends it (output is bytes, not necessarily text), unless
// the reader asked for utf8; Encoding says which.
type ProcessLogEntry struct {
	Sequence    uint64            `json:"sequence"`
	Stream      ProcessLogsStream `json:"stream" enum:"stdout,stderr,combined,pty"`
	TimestampMs int64             `json:"timestampMs"`
	Data        string            `json:"data"`
	Encoding    string            `json:"encoding"`
}

// ProcessLogGap says entries were evicted from the process's bounded log
// before the reader got them: sequences LastSequence+1 up to
// OldestAvailable-1 are gone.
type ProcessLogGap struct {
	LastSequence    uint64 `json:"lastSequence"`
	OldestAvailable uint64 `json:"oldestAvailable"`
}

// ProcessLogsResponse is a snapshot of a process's buffered log.
type ProcessLogsResponse struct {
	ProcessID string            `json:"processId"`
	Stream    ProcessLogsStream `json:"stream" enum:"stdout,stderr,combined,pty"`
	Entries   []ProcessLogEntry `json:"entries"`
	// Gap is set when entries after the requested position were evicted
	// (beyond the SDK's schema).
	Gap *ProcessLogGap `json:"gap,omitempty"`
}
