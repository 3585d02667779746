// Package mockagent is the built-in mock ACP agent, run as
// "sandbox-agent mock-agent-process". It is a real ACP agent written with
// acp-go-sdk, so clients, tests, demos and conformance kits can drive the
// daemon without any install step or model. It is a test double: small,
// in memory, and deterministic (no clock or randomness in any answer:
// session ids count up from mock-1 in each process).
//
// It advertises and implements, in memory: session/new, session/load (the
// session's history replayed as session/update notifications before the
// answer), session/list, session/resume, session/close, two modes with
// session/set_mode (a current_mode_update before the answer), two select
// config options with session/set_config_option (answered with all of
// them), and image, audio and embedded-resource prompts (each echoed as one
// line saying what it was). agentInfo names it.
//
// The SDK handles the ACP methods and answers unknown ones with -32601. In
// front of it sits a small line router that answers itself what the SDK
// would not answer as an agent must: a line that is not a JSON-RPC message
// (-32700 or -32600, the same bytes the stdio bridge answers with), and the
// test methods (testMethods, and any method under "_mock/"), which get
// {"echoedMethod": <method>} so transport tests can send requests of any
// size and get a reply.
//
// Prompt words (the first word of the prompt text decides):
//
//	permission      ask session/request_permission, then report the outcome
//	stream N        send N agent_message_chunk updates ("mock: chunk i")
//	slow MS         wait MS milliseconds before answering (session/cancel ends it)
//	wait            send "mock: waiting", then wait until cancelled (or closed)
//	think           send an agent_thought_chunk before the answer
//	tool            send a tool_call and its completing tool_call_update
//	plan            send a plan with two entries
//	stderr TEXT     write TEXT to stderr
//	exit [CODE]     exit the process at once with CODE (default 1)
//	anything else   one agent_message_chunk "mock: <text>"
//
// Every turn ends with stopReason end_turn (or cancelled).
//
// At stdin's end the turns still running are cancelled, every request
// already sent is answered, and Run returns.
package mockagent
