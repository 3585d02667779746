package domain

// BearerToken returns the token of an Authorization value "Bearer
// <token>", and false for any other value. The form is the one the
// reference server accepts and every official client sends: the scheme
// spelt "Bearer", one space, then the token; optional whitespace around
// the whole value is ignored (HTTP strips it anyway). Anything else is no
// bearer credential at all: another spelling of the scheme ("bearer",
// "BEARER"), more spaces or a tab before the token, a token holding a
// space, a control character or DEL ("Bearer a, Bearer b"). No
// configured token can hold such a character (tokens are checked so at
// start), and reading part of such a value as the token would let two
// readers disagree.
//
// Every reader of a presented token goes through it: the daemon's token
// check, the --token-header reading, and the policy SDK's Bearer, so a
// policy recognises exactly the credentials the token check accepts, and
// none accepts a form another refuses.
func BearerToken(v string) (string, bool) {
	const scheme = "Bearer "
	v = trimOWS(v)
	if len(v) <= len(scheme) || v[:len(scheme)] != scheme {
		return "", false
	}
	tok := v[len(scheme):]
	for i := range len(tok) {
		if c := tok[i]; c <= ' ' || c == 0x7f {
			return "", false
		}
	}
	return tok, true
}

// trimOWS trims spaces and tabs at both ends.
func trimOWS(v string) string {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}
