package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/danielgtaylor/huma/v2"
)

var update = flag.Bool("update", false, "rewrite testdata/openapi.golden.json from the current routes")

const goldenPath = "testdata/openapi.golden.json"

// The operations of docs/api.md section 2, under the reference server's ids.
var referenceOperations = []string{
	"get_v1_health", "get_v1_agents", "get_v1_agent", "post_v1_agent_install",
	"get_v1_fs_entries", "get_v1_fs_file", "put_v1_fs_file", "delete_v1_fs_entry",
	"post_v1_fs_mkdir", "post_v1_fs_move", "get_v1_fs_stat", "post_v1_fs_upload_batch",
	"get_v1_config_mcp", "put_v1_config_mcp", "delete_v1_config_mcp",
	"get_v1_config_skills", "put_v1_config_skills", "delete_v1_config_skills",
	"get_v1_acp_servers", "post_v1_acp", "get_v1_acp", "delete_v1_acp",
}

// TestOpenAPIGolden pins the document the daemon serves, so any change to
// the API surface shows up in review as a diff of the golden file.
// Regenerate with: go test ./adapters/httpapi -run TestOpenAPIGolden -update
func TestOpenAPIGolden(t *testing.T) {
	doc := OpenAPI("test")
	got, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	again, _ := json.MarshalIndent(OpenAPI("test"), "", "  ")
	if !bytes.Equal(append(again, '\n'), got) {
		t.Fatal("the document is not deterministic")
	}

	ops := map[string]string{} // operationId -> method and path
	for path, item := range doc.Paths {
		for method, op := range map[string]*huma.Operation{"GET": item.Get, "PUT": item.Put, "POST": item.Post, "DELETE": item.Delete, "PATCH": item.Patch} {
			if op == nil {
				continue
			}
			if prev, dup := ops[op.OperationID]; dup {
				t.Errorf("operationId %s used twice: %s and %s %s", op.OperationID, prev, method, path)
			}
			ops[op.OperationID] = method + " " + path
		}
	}
	for _, id := range referenceOperations {
		if _, ok := ops[id]; !ok {
			t.Errorf("operation %s missing from the document", id)
		}
	}
	// The byte-pipe routes are documented with their media types.
	if post := doc.Paths["/v1/acp/{server_id}"].Post; post == nil || post.RequestBody.Content["application/json"].Schema == nil {
		t.Errorf("POST /v1/acp/{server_id} body undocumented")
	}
	if get := doc.Paths["/v1/acp/{server_id}"].Get; get == nil || get.Responses["200"].Content["text/event-stream"] == nil {
		t.Errorf("GET /v1/acp/{server_id} stream undocumented")
	}

	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", goldenPath)
		return
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the OpenAPI document differs from %s (first difference near byte %d); if the change is intended, run\n"+
			"\tgo test ./adapters/httpapi -run TestOpenAPIGolden -update\nand review the diff", goldenPath, firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// The served document is the golden one: the same JSON value, whatever
// the serialiser's spacing. The server has every route the daemon mounts
// (the use cases are never called).
func TestOpenAPIServed(t *testing.T) {
	srv := plainServer(t, everyRoute(Config{Version: "test"}))
	resp, body := doHTTP(t, "GET", srv.URL+"/openapi.json", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	golden, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var served, want any
	if err := json.Unmarshal(body, &served); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(golden, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(served, want) {
		got, _ := json.MarshalIndent(served, "", "  ")
		t.Errorf("GET /openapi.json differs from %s (first difference near byte %d of the indented form)", goldenPath, firstDiff(append(got, '\n'), golden))
	}
}
