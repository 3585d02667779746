package wasmpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

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

// Want is an expected decision. Status and Message are compared only when
// set (a deny's status is the one the daemon would send: 403 when the
// policy gives none).
type Want struct {
	Allow   bool   `json:"allow"`
	Status  int    `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// ReadCases reads a case file.
func ReadCases(path string) ([]Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read cases: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var cases []Case
	if err := dec.Decode(&cases); err != nil {
		return nil, fmt.Errorf("cases file %s: %w", path, err)
	}
	for i := range cases {
		if cases[i].Name == "" {
			cases[i].Name = fmt.Sprintf("case %d", i+1)
		}
	}
	return cases, nil
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
		got, err := set.Authorize(ctx, req)
		if err != nil {
			return failed, err
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
	switch {
	case got.Allow != w.Allow, !w.Allow && w.Status != 0 && got.Status != w.Status,
		!w.Allow && w.Message != "" && got.Message != w.Message:
		return fmt.Sprintf("got %s, want %s", describeDecision(got.Allow, got.Status, got.Message), describeDecision(w.Allow, w.Status, w.Message))
	}
	return ""
}

func describeDecision(allow bool, status int, msg string) string {
	if allow {
		return "allow"
	}
	s := "deny"
	if status != 0 {
		s += fmt.Sprintf(" %d", status)
	}
	if msg != "" {
		s += fmt.Sprintf(" %q", msg)
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
