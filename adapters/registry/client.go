package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// DefaultURL is the ACP registry the reference uses.
const DefaultURL = "https://cdn.agentclientprotocol.com/registry/v1/latest/registry.json"

// maxRegistryBytes bounds the registry document.
const maxRegistryBytes = 32 << 20

// Client fetches the registry at URL and downloads files.
type Client struct {
	URL  string
	HTTP *http.Client
	// StallTimeout ends a download whose body stops arriving (default 60 s).
	StallTimeout time.Duration
}

var (
	_ ports.Registry   = (*Client)(nil)
	_ ports.Downloader = (*Client)(nil)
)

// New returns a client of the registry at url with bounded timeouts.
func New(url string) *Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
	}
	return &Client{URL: url, HTTP: &http.Client{Transport: tr}}
}

// Fetch implements ports.Registry.
func (c *Client) Fetch(ctx context.Context) (domain.Registry, error) {
	var buf limitedBuffer
	buf.max = maxRegistryBytes
	if _, err := c.Download(ctx, c.URL, &buf); err != nil {
		return domain.Registry{}, fmt.Errorf("ACP registry: %w", err)
	}
	r, err := domain.ParseRegistry(buf.b)
	if err != nil {
		return domain.Registry{}, fmt.Errorf("ACP registry %s: %w", domain.ShownURL(c.URL), err)
	}
	return r, nil
}

// Download implements ports.Downloader.
func (c *Client) Download(ctx context.Context, url string, w io.Writer) (int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	shown := domain.ShownURL(url) // errors reach API clients: no credentials
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", shown, unwrapURLError(err))
	}
	req.Header.Set("User-Agent", "sandbox-agent")
	hc := c.HTTP
	if hc == nil {
		hc = New(url).HTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", shown, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("GET %s: %s: %s", shown, resp.Status, snippet)
	}
	stall := c.StallTimeout
	stall = cmp.Or(max(stall, 0), 60*time.Second)
	errStalled := fmt.Errorf("no data for %v", stall)
	timer := time.AfterFunc(stall, func() { cancel(errStalled) })
	defer timer.Stop()
	n, err := io.Copy(w, &watchdog{r: resp.Body, timer: timer, d: stall})
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
		return n, fmt.Errorf("GET %s: %w", shown, err)
	}
	return n, nil
}

func unwrapURLError(err error) error {
	// A failed lookup names the host's resolver ("lookup h on
	// 10.0.0.2:53: no such host"): the sandbox's network layout, which
	// reaches API clients and helps none. The name and the answer do.
	var de *net.DNSError
	if errors.As(err, &de) {
		shown := *de
		shown.Server = ""
		return &shown
	}
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// watchdog pushes the stall timer back on every read that brings data.
type watchdog struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (w *watchdog) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.timer.Reset(w.d)
	}
	return n, err
}

type limitedBuffer struct {
	b   []byte
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if len(l.b)+len(p) > l.max {
		return 0, fmt.Errorf("document larger than %d bytes", l.max)
	}
	l.b = append(l.b, p...)
	return len(p), nil
}
