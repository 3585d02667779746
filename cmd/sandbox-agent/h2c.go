package main

import "net/http"

// serverProtocols serves HTTP/1.1 and cleartext HTTP/2 (h2c with prior
// knowledge) on the daemon's one port. ACP's Streamable HTTP transport asks
// for HTTP/2, so one TCP connection carries the long-lived streams and the
// POSTs together; HTTP/1.1 stays for every existing client, for SSE and for
// WebSocket upgrades (which need HTTP/1.1).
func serverProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}
