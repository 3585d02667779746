// Renders /openapi.json with the Swagger UI bundle served next to this file.
// A file of its own, not an inline script, so the page runs under the
// daemon's strict Content-Security-Policy (script-src 'self').
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  // The default validator badge loads an image from a public host; the page
  // talks only to the daemon that served it.
  validatorUrl: null,
  tryItOutEnabled: false,
  // Operation ids (post_v1_acp, ...) are what the SDKs and the CLI name.
  displayOperationId: true,
});
