// Package mockagent is the built-in mock ACP agent, run as
// "sandbox-agent mock-agent-process". It is a real ACP agent written with
// acp-go-sdk, so clients, tests and demos can drive the daemon without any
// install step or model.
//
// The SDK handles the ACP methods it knows. In front of it sits a small line
// router that answers every other request with {"echoedMethod": <method>}
// (the SDK would answer "method not found"), so transport tests can send
// arbitrary requests, of any size, and get a reply.
//
// Prompt words (the first word of the prompt text decides):
//
//	permission      ask session/request_permission, then report the outcome
//	stream N        send N agent_message_chunk updates ("mock: chunk i")
//	slow MS         wait MS milliseconds before answering (session/cancel ends it)
//	think           send an agent_thought_chunk before the answer
//	tool            send a tool_call and its completing tool_call_update
//	plan            send a plan with two entries
//	stderr TEXT     write TEXT to stderr
//	exit [CODE]     exit the process at once with CODE (default 1)
//	anything else   one agent_message_chunk "mock: <text>"
//
// Every turn ends with stopReason end_turn (or cancelled).
package mockagent
