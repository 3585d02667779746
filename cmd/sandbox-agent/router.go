package main

import (
	"context"
	"os"

	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
)

// routerFlags reach a daemon behind a router that picks the sandbox by
// headers (kubernetes-sigs/agent-sandbox's sandbox-router): the bridge and
// the api commands take them. The router's own token is read from a file
// or $SANDBOX_AGENT_ROUTER_TOKEN, never from the command line.
type routerFlags struct {
	sandboxID, namespace, tokenFile, tokenHeader string
	port                                         int
}

func (f *routerFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.sandboxID, "sandbox-id", "", "reach the daemon through a router as this sandbox (X-Sandbox-ID; --endpoint is the router's URL)")
	fs.StringVar(&f.namespace, "sandbox-namespace", "", "the sandbox's namespace (X-Sandbox-Namespace; default: the router's)")
	fs.IntVar(&f.port, "sandbox-port", 0, "the daemon's port in the sandbox (X-Sandbox-Port; default: the router's, 8888)")
	fs.StringVar(&f.tokenFile, "router-token-file", "", "file holding the router's own bearer token (default: $SANDBOX_AGENT_ROUTER_TOKEN)")
	fs.StringVar(&f.tokenHeader, "token-header", "", "send the daemon's token in this header instead of Authorization (the daemon's --token-header; default behind a router: "+httpclient.DefaultTokenHeader+")")
	setMin(fs, "sandbox-port", "0")
}

const routerTokenEnv = "SANDBOX_AGENT_ROUTER_TOKEN"

// apply sets c up to go through the router, when --sandbox-id says so.
func (f *routerFlags) apply(c *httpclient.Client) error {
	c.TokenHeader = f.tokenHeader
	if f.sandboxID == "" {
		if f.namespace != "" || f.port != 0 || f.tokenFile != "" {
			return usagef("--sandbox-namespace, --sandbox-port and --router-token-file need --sandbox-id")
		}
		return nil
	}
	if f.port > 65535 {
		return usagef("--sandbox-port must be a port number, got %d", f.port)
	}
	token := os.Getenv(routerTokenEnv)
	if f.tokenFile == "" {
		if err := checkToken(token, "$"+routerTokenEnv); err != nil {
			return err
		}
	} else {
		var err error
		if token, err = readClientToken(context.Background(), "--router-token-file", f.tokenFile); err != nil {
			return err
		}
	}
	c.Router = &httpclient.Router{SandboxID: f.sandboxID, Namespace: f.namespace, Port: f.port, Token: token}
	return nil
}
