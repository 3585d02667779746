package domain

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The _adapter/* notifications are the only messages the daemon itself puts
// on an ACP stream. Each builder returns one single-line JSON object.

// MaxInvalidStdoutRaw bounds how much of a non-JSON stdout line is quoted
// back in an _adapter/invalid_stdout notification.
const MaxInvalidStdoutRaw = 4 << 10

// AgentExitedMessage reports that the agent process ended. code is nil when
// the process was killed by a signal.
func AgentExitedMessage(success bool, code *int) []byte {
	c := "null"
	if code != nil {
		c = strconv.Itoa(*code)
	}
	return []byte(`{"jsonrpc":"2.0","method":"_adapter/agent_exited","params":{"success":` +
		strconv.FormatBool(success) + `,"code":` + c + `}}`)
}

// InvalidStdoutMessage wraps a stdout line that was not JSON.
func InvalidStdoutMessage(reason string, line []byte) []byte {
	if len(line) > MaxInvalidStdoutRaw {
		// Back up over the continuation bytes of a character split by the
		// cut (at most three). Invalid bytes elsewhere stay: quoting turns
		// them into U+FFFD, so they must not shorten the quote.
		cut := MaxInvalidStdoutRaw
		for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(line[cut]); i++ {
			cut--
		}
		line = line[:cut]
	}
	return []byte(`{"jsonrpc":"2.0","method":"_adapter/invalid_stdout","params":{"error":` +
		quote(reason) + `,"raw":` + quote(string(line)) + `}}`)
}

// ReplayGapMessage tells a reader that events after lastEventID up to
// oldestAvailable-1 were evicted before it could read them.
func ReplayGapMessage(lastEventID, oldestAvailable uint64) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"_adapter/replay_gap","params":{"lastEventId":` +
		strconv.FormatUint(lastEventID, 10) + `,"oldestAvailable":` +
		strconv.FormatUint(oldestAvailable, 10) + `}}`)
}

// AgentStoppedResponse is the JSON-RPC error given to an asynchronous request
// still pending when its agent exits.
func AgentStoppedResponse(id []byte) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) +
		`,"error":{"code":-32603,"message":"agent process stopped before responding"}}`)
}

func quote(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}
