package abi

import (
	"cmp"
	"errors"
	"unicode/utf8"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Verdicts of an answer record.
const (
	VerdictDeny  = 0
	VerdictPass  = 1 // ABI v1 called it allow
	VerdictError = 2 // the policy could not decide; its fail mode applies
	VerdictGrant = 3 // ABI v2
)

// VerdictAllow is the ABI v1 name of VerdictPass.
const VerdictAllow = VerdictPass

// answerHeader is verdict (1 byte), flags (1 byte, FlagVary), 2 zero
// bytes, status (u32).
const answerHeader = 8

// AppendDecision encodes d as an answer record and appends it to dst. The
// text after the header is a deny's message, or the principal of a grant
// or of an authenticating pass.
func AppendDecision(dst []byte, d domain.Decision) []byte {
	verdict, text := byte(VerdictDeny), d.Message
	switch d.Verdict {
	case domain.Pass:
		verdict, text = VerdictPass, d.Principal
	case domain.Grant:
		verdict, text = VerdictGrant, d.Principal
	}
	dst = append(dst, verdict, 0, 0, 0)
	dst = le.AppendUint32(dst, uint32(max(d.Status, 0)))
	return append(dst, text...)
}

// AppendError encodes a failure to decide, with its reason.
func AppendError(dst []byte, msg string) []byte {
	dst = append(dst, VerdictError, 0, 0, 0, 0, 0, 0, 0)
	return append(dst, msg...)
}

// ErrBadAnswer is an answer record that is too short or has an unknown
// verdict.
var ErrBadAnswer = errors.New("malformed answer record")

// MaxText bounds the text of an answer the host keeps (a deny's message,
// a principal, an error's reason): longer text is cut to it, at a UTF-8
// boundary.
const MaxText = 1024

// CutText is b cut to MaxText bytes, at a UTF-8 boundary.
func CutText(b []byte) []byte {
	if len(b) <= MaxText {
		return b
	}
	n := MaxText
	for n > MaxText-utf8.UTFMax && n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}

// ParseAnswer reads an answer record of a module built for ABI version.
// A VerdictError answer is returned as failure, the policy's message; err
// is set only when b is malformed. A v1 module's allow is a pass whatever
// text follows it, and v1 has no grant. The text is cut to MaxText before
// it is copied: a guest may answer with its whole memory.
func ParseAnswer(b []byte, version uint32) (d domain.Decision, failure string, err error) {
	if len(b) < answerHeader {
		return d, "", ErrBadAnswer
	}
	raw, _, ok := answerText(b)
	if version < 2 {
		raw, ok = b[answerHeader:], true // v1 had no flags
	}
	if !ok {
		return d, "", ErrBadAnswer
	}
	text := string(CutText(raw))
	switch b[0] {
	case VerdictPass:
		if version < 2 {
			text = ""
		}
		return domain.Decision{Verdict: domain.Pass, Principal: text}, "", nil
	case VerdictGrant:
		if version < 2 {
			return d, "", ErrBadAnswer
		}
		return domain.Decision{Verdict: domain.Grant, Principal: text}, "", nil
	case VerdictDeny:
		return domain.Decision{Verdict: domain.Deny, Status: int(le.Uint32(b[4:])), Message: text}, "", nil
	case VerdictError:
		text = cmp.Or(text, "policy error")
		return d, text, nil
	}
	return d, "", ErrBadAnswer
}
