package abi

import (
	"errors"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Verdicts of an answer record.
const (
	VerdictDeny  = 0
	VerdictAllow = 1
	VerdictError = 2 // the policy could not decide; its fail mode applies
)

// answerHeader is verdict (1 byte), 3 zero bytes, status (u32).
const answerHeader = 8

// AppendDecision encodes d as an answer record and appends it to dst.
func AppendDecision(dst []byte, d domain.Decision) []byte {
	verdict := byte(VerdictDeny)
	if d.Allow {
		verdict = VerdictAllow
	}
	dst = append(dst, verdict, 0, 0, 0)
	dst = le.AppendUint32(dst, uint32(max(d.Status, 0)))
	if !d.Allow {
		dst = append(dst, d.Message...)
	}
	return dst
}

// AppendError encodes a failure to decide, with its reason.
func AppendError(dst []byte, msg string) []byte {
	dst = append(dst, VerdictError, 0, 0, 0, 0, 0, 0, 0)
	return append(dst, msg...)
}

// ErrBadAnswer is an answer record that is too short or has an unknown
// verdict.
var ErrBadAnswer = errors.New("malformed answer record")

// ParseAnswer reads an answer record. A VerdictError answer is returned as
// failure, the policy's message; err is set only when b is malformed.
func ParseAnswer(b []byte) (d domain.Decision, failure string, err error) {
	if len(b) < answerHeader {
		return d, "", ErrBadAnswer
	}
	msg := string(b[answerHeader:])
	switch b[0] {
	case VerdictAllow:
		return domain.Decision{Allow: true}, "", nil
	case VerdictDeny:
		return domain.Decision{Status: int(le.Uint32(b[4:])), Message: msg}, "", nil
	case VerdictError:
		if msg == "" {
			msg = "policy error"
		}
		return d, msg, nil
	}
	return d, "", ErrBadAnswer
}
