// Command hmactoken is an auth policy accepting bearer tokens signed with a
// shared secret and carrying an expiry, so tokens can be minted elsewhere
// without the daemon knowing them:
//
//	{"secret": "a long random string"}
//
// A token is SUBJECT.EXPIRY.SIGNATURE: EXPIRY in Unix seconds and
// SIGNATURE the unpadded base64url HMAC-SHA256 of "SUBJECT.EXPIRY" under
// the secret. Mint one in a shell:
//
//	payload="alice.$(( $(date +%s) + 3600 ))"
//	sig=$(printf %s "$payload" | openssl dgst -sha256 -hmac "$SECRET" -binary | base64 | tr '+/' '-_' | tr -d '=')
//	echo "$payload.$sig"
//
// A valid token authenticates the request as its subject ("hmac:SUBJECT")
// without deciding it (guest.Identify): policies after this one see the
// principal and may still deny (denymethods, say); when none does, the
// request goes through without the built-in token check. A token that has
// the shape SUBJECT.EXPIRY.SIGNATURE but a bad signature or a past expiry
// is answered 401. Any other bearer token, or none, passes: with --token
// set, the admin token still works and strangers get the built-in 401.
// The expiry is checked against the host's wall clock.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hmactoken.wasm .
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

type policy struct {
	secret []byte
	now    func() time.Time
}

func (p *policy) Configure(config []byte) error {
	var c struct {
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return err
	}
	if len(c.Secret) < 16 {
		return errors.New(`config needs {"secret": "<at least 16 characters>"}`)
	}
	p.secret = []byte(c.Secret)
	if p.now == nil {
		p.now = time.Now
	}
	return nil
}

func (p *policy) Authorize(req *guest.Request) domain.Decision {
	token := req.Bearer()
	if !looksSigned(token) {
		return guest.Pass() // not ours: the built-in check decides
	}
	subject, err := p.verify(token)
	if err != nil {
		guest.Logf("rejected token for %q from %s: %v", subject, req.RemoteAddr(), err)
		return guest.Deny(401, err.Error())
	}
	return guest.Identify("hmac:" + subject)
}

// verify checks the signature, then the expiry, and returns the subject.
func (p *policy) verify(token string) (string, error) {
	payload, sig, ok := cutLast(token)
	if !ok {
		return "", errors.New("malformed token")
	}
	subject, expiry, ok := cutLast(payload)
	if !ok || subject == "" {
		return "", errors.New("malformed token")
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, Sign(p.secret, payload)) {
		return subject, errors.New("bad token signature")
	}
	exp, err := strconv.ParseInt(expiry, 10, 64)
	if err != nil {
		return subject, errors.New("malformed token expiry")
	}
	if p.now().Unix() >= exp {
		return subject, errors.New("token expired")
	}
	return subject, nil
}

// looksSigned reports whether token has this policy's shape: at least
// two dots, something before them, and a numeric expiry.
func looksSigned(token string) bool {
	payload, _, ok := cutLast(token)
	if !ok {
		return false
	}
	subject, expiry, ok := cutLast(payload)
	if !ok || subject == "" || expiry == "" {
		return false
	}
	_, err := strconv.ParseInt(expiry, 10, 64)
	return err == nil
}

func cutLast(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// Sign is the HMAC-SHA256 of payload under secret.
func Sign(secret []byte, payload string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// Mint returns a token for subject valid until expiry.
func Mint(secret []byte, subject string, expiry time.Time) string {
	payload := subject + "." + strconv.FormatInt(expiry.Unix(), 10)
	return payload + "." + base64.RawURLEncoding.EncodeToString(Sign(secret, payload))
}

func init() { guest.Register(&policy{}) }

func main() {}
