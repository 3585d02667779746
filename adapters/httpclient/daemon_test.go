package httpclient_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// TestTypedCallsAgainstDaemon runs every typed call against the real
// daemon started by TestMain, so the client's paths, queries, bodies and
// answer shapes are those of the server.
func TestTypedCallsAgainstDaemon(t *testing.T) {
	ctx := context.Background()
	c := &httpclient.Client{BaseURL: daemonURL}
	var p *httpclient.Problem

	if err := c.Health(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}
	agents, err := c.ListAgents(ctx, false, false)
	if err != nil || len(agents) == 0 || agents[len(agents)-1].ID == "" {
		t.Fatalf("agents: %v %v", agents, err)
	}
	if a, err := c.Agent(ctx, "mock", true, false); err != nil || a.ID != "mock" {
		t.Fatalf("agent mock: %+v %v", a, err)
	}
	var reports []httpclient.InstallProgress
	var mu sync.Mutex
	res, err := c.InstallAgentWithProgress(ctx, "mock", domain.InstallOptions{}, time.Millisecond, func(r httpclient.InstallProgress) {
		mu.Lock()
		reports = append(reports, r)
		mu.Unlock()
	})
	if err != nil || !res.AlreadyInstalled { // the mock is built in
		t.Fatalf("install mock: %+v %v", res, err)
	}
	if last := reports[len(reports)-1]; !last.Done || last.Err != nil || last.Agent != "mock" {
		t.Fatalf("last progress report %+v", last)
	}

	// Files: tar upload from a reader, listing, move, mkdir, read, ranges.
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	for name, body := range map[string]string{"a.txt": "alpha", "sub/b.txt": "bravo!"} {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	up, err := c.UploadBatch(ctx, "typed", io.MultiReader(&tarball)) // any io.Reader, length unknown
	if err != nil || len(up.Paths) != 2 || up.Truncated {
		t.Fatalf("upload: %+v %v", up, err)
	}
	entries, err := c.FSEntries(ctx, "typed")
	if err != nil || len(entries) != 2 {
		t.Fatalf("entries: %+v %v", entries, err)
	}
	if _, err := c.Mkdir(ctx, "typed/new/dir"); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	from, to, err := c.Move(ctx, "typed/a.txt", "typed/new/dir/a.txt", false)
	if err != nil || !strings.HasSuffix(from, "/typed/a.txt") || !strings.HasSuffix(to, "/typed/new/dir/a.txt") {
		t.Fatalf("move: %s %s %v", from, to, err)
	}
	if b, err := c.ReadFile(ctx, "typed/new/dir/a.txt"); err != nil || string(b) != "alpha" {
		t.Fatalf("read: %q %v", b, err)
	}
	body, err := c.OpenFile(ctx, "typed/sub/b.txt", 2, -1)
	if err != nil {
		t.Fatal(err)
	}
	tail, _ := io.ReadAll(body)
	body.Close()
	if string(tail) != "avo!" {
		t.Fatalf("range to the end: %q", tail)
	}
	if _, err := c.OpenFile(ctx, "typed/sub/b.txt", 100, 5); !errors.As(err, &p) || p.Status != 416 {
		t.Fatalf("range past the end: %v", err)
	}
	if _, err := c.DeleteFSEntry(ctx, "typed", false); !errors.As(err, &p) || p.Status != 400 {
		t.Fatalf("delete non-empty dir without recursive: %v", err)
	}
	if _, err := c.DeleteFSEntry(ctx, "typed", true); err != nil {
		t.Fatalf("delete: %v", err)
	}

	// Config.
	dir := t.TempDir()
	mcp, err := domain.ParseMCPServerConfig([]byte(`{"type":"local","command":"my-mcp","args":["--x"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetMCPConfig(ctx, dir, "tools", mcp); err != nil {
		t.Fatalf("set mcp: %v", err)
	}
	got, err := c.MCPConfig(ctx, dir, "tools")
	if err != nil || got.Type != "local" || len(got.Args) != 1 {
		t.Fatalf("get mcp: %+v %v", got, err)
	}
	if err := c.DeleteMCPConfig(ctx, dir, "tools"); err != nil {
		t.Fatalf("delete mcp: %v", err)
	}
	if _, err := c.MCPConfig(ctx, dir, "tools"); !errors.As(err, &p) || p.Kind() != "session_not_found" || p.SessionID != "mcp:tools" {
		t.Fatalf("mcp after delete: %v", err)
	}
	skills, err := domain.ParseSkillsConfig([]byte(`{"sources":[{"type":"github","source":"o/r"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetSkillsConfig(ctx, dir, "s", skills); err != nil {
		t.Fatalf("set skills: %v", err)
	}
	if got, err := c.SkillsConfig(ctx, dir, "s"); err != nil || len(got.Sources) != 1 {
		t.Fatalf("get skills: %+v %v", got, err)
	}
	if err := c.DeleteSkillsConfig(ctx, dir, "s"); err != nil {
		t.Fatalf("delete skills: %v", err)
	}

	// Instances.
	if _, err := c.PostACP(ctx, "typed-acp", "mock", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)); err != nil {
		t.Fatalf("post: %v", err)
	}
	servers, err := c.ListACPServers(ctx)
	if err != nil || len(servers) != 1 || servers[0].ServerID != "typed-acp" || servers[0].Agent != "mock" || servers[0].LastEventID != 1 {
		t.Fatalf("servers: %+v %v", servers, err)
	}
	if _, err := c.ACPStderr(ctx, "typed-acp"); err != nil {
		t.Fatalf("stderr: %v", err)
	}
	if err := c.CloseACP(ctx, "typed-acp"); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := c.ACPStderr(ctx, "typed-acp"); !errors.As(err, &p) || p.Kind() != "session_not_found" {
		t.Fatalf("stderr after close: %v", err)
	}
}

// TestWriteFileFromAPipe: WriteFile streams a pipe (of unknown length) to
// the daemon whole, and closes it once done, as net/http closes a request
// body.
func TestWriteFileFromAPipe(t *testing.T) {
	ctx := context.Background()
	c := &httpclient.Client{BaseURL: daemonURL}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	want := strings.Repeat("0123456789", 100_000)
	go func() {
		io.WriteString(pw, want)
		pw.Close()
	}()
	w, err := c.WriteFile(ctx, "piped/file", pr)
	if err != nil || w.BytesWritten != int64(len(want)) {
		t.Fatalf("write: %+v %v", w, err)
	}
	if _, err := pr.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("the pipe was not closed: %v", err)
	}
	got, err := c.ReadFile(ctx, "piped/file")
	if err != nil || string(got) != want {
		t.Fatalf("read back %d bytes: %v", len(got), err)
	}
	c.DeleteFSEntry(ctx, "piped", true)
}
