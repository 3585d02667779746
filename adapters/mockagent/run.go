package mockagent

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"sync"

	acp "github.com/coder/acp-go-sdk"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// sdkMethods are the agent-side methods acp-go-sdk dispatches itself; the
// router answers any other request directly.
var sdkMethods = map[string]bool{
	acp.AgentMethodInitialize:             true,
	acp.AgentMethodAuthenticate:           true,
	acp.AgentMethodSessionNew:             true,
	acp.AgentMethodSessionLoad:            true,
	acp.AgentMethodSessionPrompt:          true,
	acp.AgentMethodSessionCancel:          true,
	acp.AgentMethodSessionSetMode:         true,
	acp.AgentMethodSessionClose:           true,
	acp.AgentMethodSessionList:            true,
	acp.AgentMethodSessionResume:          true,
	acp.AgentMethodSessionSetConfigOption: true,
}

// lineWriter serialises whole-line writes from the SDK and the router.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Run serves the mock agent on the given streams until stdin ends.
func Run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	out := &lineWriter{w: stdout}
	toSDK, sdkIn := io.Pipe()
	a := &agent{stderr: stderr, exit: exitProcess, cancels: map[acp.SessionId]context.CancelFunc{}}
	a.conn = acp.NewAgentSideConnection(a, out, toSDK)

	go func() {
		err := route(stdin, sdkIn, out)
		sdkIn.CloseWithError(err)
	}()
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
	}
	return nil
}

// route reads stdin line by line, answers requests the SDK does not know with
// {"echoedMethod": ...} and hands everything else to the SDK.
func route(stdin io.Reader, sdk io.Writer, out io.Writer) error {
	r := bufio.NewReaderSize(stdin, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			// Without its line ending the frame parses in place (a raw LF
			// would make ParseFrame compact a copy).
			f, perr := domain.ParseFrame(bytes.TrimRight(line, "\r\n"))
			if perr == nil && f.Kind == domain.FrameRequest && !sdkMethods[f.Method] {
				method, _ := jsonString(f.Method)
				resp := `{"jsonrpc":"2.0","id":` + string(f.ID) + `,"result":{"echoedMethod":` + method + `}}` + "\n"
				if _, werr := io.WriteString(out, resp); werr != nil {
					return werr
				}
			} else if _, werr := sdk.Write(line); werr != nil {
				return werr
			}
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}
