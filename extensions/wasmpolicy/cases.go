package wasmpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Case is one request and the decision a policy is expected to make, as
// in the file `sandbox-agent policy test` reads (a JSON array of cases).
type Case struct {
	Name    string             `json:"name"`
	Request domain.AuthRequest `json:"request"`
	// Config, when set, replaces the policy's configuration for this case.
	Config json.RawMessage `json:"config,omitempty"`
	Want   Want            `json:"want"`
}

// Want is an expected decision. Decision ("deny", "pass" or "grant") is
// compared when set; otherwise Allow says whether the request gets through
// (pass or grant: the ABI v1 form). Status, Message and Principal are
// compared only when set (a deny's status is the one the daemon would send:
// 403 when the policy gives none).
type Want struct {
	Decision  string `json:"decision,omitempty"`
	Allow     bool   `json:"allow"`
	Status    int    `json:"status,omitempty"`
	Message   string `json:"message,omitempty"`
	Principal string `json:"principal,omitempty"`
}

// maxCasesFile caps a case file: cases are requests written by hand.
const maxCasesFile = 64 << 20

// ReadCases reads a case file: a regular file (opened without blocking, so
// a FIFO cannot hang "policy test") of at most maxCasesFile bytes, holding
// at least one case (none would "pass" a policy never loaded).
func ReadCases(path string) ([]Case, error) {
	b, err := readRegular(path, maxCasesFile)
	if err != nil {
		return nil, fmt.Errorf("read cases: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var cases []Case
	if err := dec.Decode(&cases); err != nil {
		return nil, fmt.Errorf("cases file %s: %w", path, err)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("cases file %s: no cases (a JSON list of {\"request\": ..., \"want\": ...})", path)
	}
	for i := range cases {
		if cases[i].Name == "" {
			cases[i].Name = fmt.Sprintf("case %d", i+1)
		}
	}
	return cases, nil
}

func readRegular(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, err
}

// RunCases loads spec once per distinct configuration, decides every case,
// writes one line per case to w, and returns how many did not match. An
// error means a policy could not be loaded at all.
func (h *Host) RunCases(ctx context.Context, spec Spec, cases []Case, w io.Writer) (failed int, err error) {
	sets := map[string]*Set{}
	defer func() {
		for _, s := range sets {
			_ = s.Close(ctx)
		}
	}()
	for _, c := range cases {
		s := spec
		if c.Config != nil {
			s.Config, s.ConfigPath = c.Config, ""
		}
		key := string(c.Config)
		set, ok := sets[key]
		if !ok {
			if set, err = h.Load(ctx, []Spec{s}); err != nil {
				return failed, err
			}
			sets[key] = set
		}
		req := c.Request
		req.Headers = lowerKeys(req.Headers)
		var failures []string
		set.failed = func(policy string, err error) {
			first, _, _ := strings.Cut(err.Error(), "\n") // a trap's wasm stack trace follows
			failures = append(failures, "policy "+policy+" failed: "+first)
		}
		got, err := set.Authorize(ctx, req)
		set.failed = nil
		if err != nil {
			return failed, err
		}
		if len(failures) > 0 {
			// Failing closed may deny as the case wants, but a failure is
			// no decision: the policy never answered.
			failed++
			mode := "denied (fail closed)"
			if s.FailOpen {
				mode = "passed on (fail=open)"
			}
			fmt.Fprintf(w, "FAIL  %s: %s; %s\n", c.Name, strings.Join(failures, "; "), mode)
			continue
		}
		if problem := c.Want.mismatch(got); problem != "" {
			failed++
			fmt.Fprintf(w, "FAIL  %s: %s\n", c.Name, problem)
			continue
		}
		fmt.Fprintf(w, "ok    %s\n", c.Name)
	}
	return failed, nil
}

func (w Want) mismatch(got domain.Decision) string {
	verdictOK := got.Allowed() == w.Allow
	if w.Decision != "" {
		verdictOK = got.Verdict.String() == w.Decision
	}
	deny := got.Verdict == domain.Deny
	if !verdictOK || (deny && w.Status != 0 && got.Status != w.Status) ||
		(deny && w.Message != "" && got.Message != w.Message) ||
		(w.Principal != "" && got.Principal != w.Principal) {
		return fmt.Sprintf("got %s, want %s", describeGot(got), w.describe())
	}
	return ""
}

func describeGot(d domain.Decision) string {
	s := d.Verdict.String()
	if d.Verdict == domain.Deny {
		if d.Status != 0 {
			s += fmt.Sprintf(" %d", d.Status)
		}
		if d.Message != "" {
			s += fmt.Sprintf(" %q", d.Message)
		}
	} else if d.Principal != "" {
		s += fmt.Sprintf(" as %q", d.Principal)
	}
	return s
}

func (w Want) describe() string {
	s := w.Decision
	if s == "" {
		s = "deny"
		if w.Allow {
			s = "allow"
		}
	}
	if w.Status != 0 {
		s += fmt.Sprintf(" %d", w.Status)
	}
	if w.Message != "" {
		s += fmt.Sprintf(" %q", w.Message)
	}
	if w.Principal != "" {
		s += fmt.Sprintf(" as %q", w.Principal)
	}
	return s
}

// lowerKeys lower-cases header names, as the daemon does.
func lowerKeys(m map[string][]string) map[string][]string {
	if m == nil {
		return nil
	}
	out := make(map[string][]string, len(m))
	for k, v := range m {
		k = strings.ToLower(k)
		out[k] = append(out[k], v...)
	}
	return out
}
