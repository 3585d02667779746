package route

import (
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
)

// Unwrap is the request and response writer under a huma context.
func Unwrap(ctx huma.Context) (*http.Request, http.ResponseWriter) { return humago.Unwrap(ctx) }

// RawRequest gives a huma input access to the request itself, for routes
// that read their body as a stream of bytes. Embedded in an input struct;
// its field stays unexported, so huma sees no parameter in it.
type RawRequest struct{ req *http.Request }

// Resolve is huma's hook, run before the handler: it keeps the request.
func (r *RawRequest) Resolve(ctx huma.Context) []error {
	r.req, _ = Unwrap(ctx)
	return nil
}

// Request is the request of the input.
func (r *RawRequest) Request() *http.Request { return r.req }

// JSONObject is the schema of a raw JSON-RPC body or answer.
var JSONObject = &huma.Schema{Type: "object", Description: "One JSON-RPC 2.0 message, passed through byte for byte."}

// Bearer marks an operation as guarded by the bearer token in the document.
var Bearer = []map[string][]string{{"bearer": {}}}

// RawBody declares a request body that the handler reads itself. It has no
// schema at registration, because huma reads and validates any body whose
// media type has one; DocumentBody adds the schema to the document after.
func RawBody(contentType string) *huma.RequestBody {
	return &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{contentType: {}}}
}

// DocumentBody sets the schema of a raw request body in the document only.
// The operation must be registered already, with RawBody(contentType).
func DocumentBody(api huma.API, path, method, contentType string, schema *huma.Schema) {
	item := api.OpenAPI().Paths[path]
	var op *huma.Operation
	if item != nil {
		op = map[string]*huma.Operation{
			http.MethodPost: item.Post, http.MethodPut: item.Put, http.MethodPatch: item.Patch,
			http.MethodDelete: item.Delete, http.MethodGet: item.Get,
		}[method]
	}
	if op == nil || op.RequestBody == nil || op.RequestBody.Content[contentType] == nil {
		panic("documentBody: no " + method + " " + path + " with a raw " + contentType + " body registered")
	}
	op.RequestBody.Content[contentType].Schema = schema
}

// RawResponse answers 200 with the agent's bytes, or 202 with no body.
func RawResponse(body []byte) *huma.StreamResponse {
	return &huma.StreamResponse{Body: func(ctx huma.Context) {
		if body == nil {
			ctx.SetStatus(http.StatusAccepted)
			return
		}
		ctx.SetHeader("Content-Type", "application/json")
		ctx.SetHeader("Content-Length", strconv.Itoa(len(body)))
		ctx.SetStatus(http.StatusOK)
		_, _ = ctx.BodyWriter().Write(body)
	}}
}
