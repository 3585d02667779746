package domain

// AuthRequest describes one HTTP request to an authorisation policy. It is
// built by the inbound adapter after the bearer check; for ACP POSTs the
// JSON-RPC kind, id and method are peeked from the body (never decoded
// further), and an SSE stream is described once, when it opens.
type AuthRequest struct {
	Method      string              `json:"method"`
	Route       string              `json:"route"`       // the route pattern, e.g. "/v1/acp/{server_id}"
	OperationID string              `json:"operationId"` // e.g. "post_v1_acp"
	Path        string              `json:"path"`
	Query       map[string][]string `json:"query,omitempty"`
	Headers     map[string][]string `json:"headers,omitempty"` // lower-case names
	RemoteAddr  string              `json:"remoteAddr"`
	ServerID    string              `json:"serverId,omitempty"`
	Agent       string              `json:"agent,omitempty"`
	RPC         *RPCInfo            `json:"rpc,omitempty"`
}

// RPCInfo is what was peeked from an ACP POST body.
type RPCInfo struct {
	Kind   string `json:"kind"` // request, notification, response, other
	ID     string `json:"id,omitempty"`
	Method string `json:"method,omitempty"`
}

// Decision is a policy's answer. A deny carries the HTTP status and message
// the daemon renders as a problem.
type Decision struct {
	Allow   bool   `json:"allow"`
	Status  int    `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}
