package route

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A lazy logger writes what Logger.With would have, in the same order.
func TestWithLazy(t *testing.T) {
	var lazy, eager bytes.Buffer
	opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	lb, eb := slog.New(slog.NewJSONHandler(&lazy, opts)), slog.New(slog.NewJSONHandler(&eager, opts))
	l := WithLazy(WithLazy(lb, slog.String("request_id", "r1")), slog.String("principal", "alice"))
	e := eb.With("request_id", "r1").With("principal", "alice")
	l.Info("auth", "action", "acp.send")
	e.Info("auth", "action", "acp.send")
	l.With("k", 1).Warn("w", "x", 2)
	e.With("k", 1).Warn("w", "x", 2)
	l.WithGroup("g").Info("grouped", "y", 3)
	e.WithGroup("g").Info("grouped", "y", 3)
	if lazy.String() != eager.String() {
		t.Errorf("lazy:\n%s\neager:\n%s", lazy.String(), eager.String())
	}
	if !strings.Contains(lazy.String(), `"principal":"alice"`) {
		t.Errorf("no principal in %s", lazy.String())
	}
	lazy.Reset()
	WithLazy(slog.New(slog.NewJSONHandler(&lazy, &slog.HandlerOptions{Level: slog.LevelWarn})), slog.String("a", "b")).Info("dropped")
	if lazy.Len() != 0 {
		t.Errorf("a record below the level was written: %s", lazy.String())
	}
}
