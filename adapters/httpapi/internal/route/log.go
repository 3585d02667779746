package route

import (
	"context"
	"log/slog"
	"slices"
)

type loggerKey struct{}

// Logger returns the request's logger (tagged with its request id, and the
// principal once the chain has named one).
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// WithLogger is ctx carrying l as the request's logger.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// WithLazy returns l with attrs added to every record it writes.
//
// Why not Logger.With: it formats the attributes for the handler up front,
// a microsecond or two per call, and every request derives a logger (its
// request id, then its principal) while most requests log nothing at the
// daemon's level. Profiled, With was the largest share of a policy grant's
// cost on the ACP round trip. Here the work is done only for records that
// are written.
func WithLazy(l *slog.Logger, attrs ...slog.Attr) *slog.Logger {
	return slog.New(lazyAttrs{}.wrap(l.Handler(), attrs))
}

// lazyAttrs is a handler adding attrs to each record before passing it on.
type lazyAttrs struct {
	inner slog.Handler
	attrs []slog.Attr
}

// wrap returns h with attrs, merging with h's own lazy attributes.
func (lazyAttrs) wrap(h slog.Handler, attrs []slog.Attr) slog.Handler {
	if l, ok := h.(*lazyAttrs); ok {
		return &lazyAttrs{inner: l.inner, attrs: append(slices.Clip(l.attrs), attrs...)}
	}
	return &lazyAttrs{inner: h, attrs: attrs}
}

func (h *lazyAttrs) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle writes r with the lazy attributes first, as Logger.With would
// have placed them. r is copied, not modified: records share state.
func (h *lazyAttrs) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *lazyAttrs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.wrap(h, attrs)
}

// WithGroup fixes the lazy attributes outside the group (rare: nothing on
// a request's path opens a group).
func (h *lazyAttrs) WithGroup(name string) slog.Handler {
	return h.inner.WithAttrs(h.attrs).WithGroup(name)
}
