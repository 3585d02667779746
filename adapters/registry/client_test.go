package registry

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

func TestRegistryContract(t *testing.T) {
	porttest.RegistryContract(t, func(t *testing.T, doc []byte) ports.Registry {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(doc)
		}))
		t.Cleanup(srv.Close)
		return New(srv.URL + "/registry.json")
	})
}

func TestDownloaderContract(t *testing.T) {
	porttest.DownloaderContract(t, func(t *testing.T, files map[string][]byte) (ports.Downloader, func(string) string) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
			if !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write(b)
		}))
		t.Cleanup(srv.Close)
		return New(""), func(name string) string { return srv.URL + "/" + name }
	})
}

// An unreachable registry is an error naming its URL, not a hang.
func TestFetchUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/registry.json"
	ln.Close()
	_, err = New(url).Fetch(context.Background())
	if err == nil || !strings.Contains(err.Error(), url) {
		t.Fatalf("err = %v, want one naming %s", err, url)
	}
}

func TestFetchHTTPError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gone", http.StatusGone)
	}))
	defer srv.Close()
	_, err := New(srv.URL).Fetch(context.Background())
	if err == nil || !strings.Contains(err.Error(), "410") || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("err = %v", err)
	}
}

// A body that stops arriving ends the download with a clear error.
func TestDownloadStall(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := New("")
	c.StallTimeout = 100 * time.Millisecond
	_, err := c.Download(context.Background(), srv.URL+"/x", io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no data for") {
		t.Fatalf("err = %v, want a stall error", err)
	}
}

// A mirror's URL may carry credentials (https://user:token@mirror/...):
// errors, which reach API clients, name the URL without them.
func TestErrorsHideURLCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad.json" {
			_, _ = w.Write([]byte("not json"))
			return
		}
		http.Error(w, "gone", http.StatusGone)
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	withCreds := func(base string) string { return strings.Replace(base, "http://", "http://user:s3cret@", 1) }
	for _, url := range []string{withCreds(srv.URL) + "/gone.json", withCreds(srv.URL) + "/bad.json", withCreds(dead) + "/registry.json", withCreds(srv.URL) + "/\x7f"} {
		_, err := New(url).Fetch(context.Background())
		if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "user") {
			t.Errorf("Fetch(%q): err = %v, want an error without the URL's credentials", url, err)
		}
	}
}

// A name that does not resolve is said so, without the address of the
// host's DNS resolver ("lookup mirror on 10.1.2.3:53: no such host"):
// that is the sandbox's network layout, of no help to an API client.
func TestErrorsHideResolver(t *testing.T) {
	c := New("http://mirror.internal/registry.json")
	c.HTTP.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		// What net.Dialer answers when the resolver says NXDOMAIN.
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: "mirror.internal", Server: "10.1.2.3:53", IsNotFound: true}}
	}
	_, err := c.Fetch(context.Background())
	if err == nil || strings.Contains(err.Error(), "10.1.2.3") || !strings.Contains(err.Error(), "lookup mirror.internal: no such host") {
		t.Fatalf("err = %v, want the name and the answer, not the resolver", err)
	}
}
