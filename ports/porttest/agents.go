package porttest

import (
	"bufio"
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// LaunchFunc is an agent launcher made of a function. It has the method
// set of app/acp's Launcher (the interface the ACP use case defines for
// itself), so tests of the use case and of its adapters share it.
type LaunchFunc func(ctx context.Context, agent string) (domain.LaunchSpec, error)

// Launch calls f.
func (f LaunchFunc) Launch(ctx context.Context, agent string) (domain.LaunchSpec, error) {
	return f(ctx, agent)
}

// LaunchAny launches any agent id as the command "<id>-acp" (a FakeRunner
// runs whatever it is asked to).
var LaunchAny = LaunchFunc(func(_ context.Context, agent string) (domain.LaunchSpec, error) {
	return domain.LaunchSpec{Agent: agent, Command: agent + "-acp"}, nil
})

// LaunchOnly launches the listed agent ids as LaunchAny does and answers
// unsupported_agent for any other.
func LaunchOnly(ids ...string) LaunchFunc {
	return func(ctx context.Context, agent string) (domain.LaunchSpec, error) {
		for _, id := range ids {
			if id == agent {
				return LaunchAny(ctx, agent)
			}
		}
		return domain.LaunchSpec{}, domain.UnsupportedAgent(agent)
	}
}

// RPCAgent returns a FakeRunner.Agent that plays a small JSON-RPC agent,
// one line per message:
//
//   - a request is answered at once with {"result":{}}, except "later",
//     held until the notification "release" answers every held one in order;
//   - the notification "burst" writes params.n notifications "tick", each
//     padded with params.size bytes, before the agent reads on;
//   - the notification "exit" exits with params.code; the end of stdin
//     exits with 0.
//
// seen, when not nil, hears each method read, before the agent acts on it.
func RPCAgent(seen chan<- string) func(domain.LaunchSpec, *FakeProcess) {
	return func(_ domain.LaunchSpec, p *FakeProcess) {
		code := 0
		defer func() { p.Exit(ExitCode(code)) }()
		answer := func(id json.RawMessage) error {
			_, err := p.AgentStdout.Write([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{}}` + "\n"))
			return err
		}
		var held []json.RawMessage
		r := bufio.NewReader(p.AgentStdin)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct{ N, Size, Code int }
			}
			if json.Unmarshal(line, &msg) != nil {
				continue
			}
			if seen != nil {
				seen <- msg.Method
			}
			switch {
			case msg.ID != nil && msg.Method == "later":
				held = append(held, msg.ID)
			case msg.ID != nil:
				err = answer(msg.ID)
			case msg.Method == "release":
				for _, id := range held {
					if err = answer(id); err != nil {
						break
					}
				}
				held = nil
			case msg.Method == "burst":
				pad := strings.Repeat("x", msg.Params.Size)
				for i := range msg.Params.N {
					if _, err = p.AgentStdout.Write([]byte(`{"jsonrpc":"2.0","method":"tick","params":{"i":` + strconv.Itoa(i) + `,"pad":"` + pad + `"}}` + "\n")); err != nil {
						break
					}
				}
			case msg.Method == "exit":
				code = msg.Params.Code
				return
			}
			if err != nil {
				return
			}
		}
	}
}
