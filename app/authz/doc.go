// Package authz is the daemon's authorisation chain. For every request it
// decides what the request will do, an action from a small stable
// vocabulary (domain.Actions) and the resource it acts on (server id,
// agent, filesystem path resolved as the daemon resolves it), then asks
// the auth policies in order (deny, grant or pass) and finally the
// built-in bearer token check (--token, --token-file,
// SANDBOX_AGENT_TOKEN). Without a token configured, a request no policy
// denied goes through.
//
// The inbound adapter builds a domain.AuthRequest with the describe
// methods of Chain, calls Authorize, and only then runs the operation; the
// decision constrains the operation (an acp.send must not start an
// instance), so nothing can be done that was not authorised.
package authz
