package api

// The API's contract for machines: an OpenAPI 3.1 document of every path a
// client uses, served as it is in the repository.

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
)

// OpenAPIPath is where the document is served below base_url.
const OpenAPIPath = "/api/openapi.json"

// OpenAPI is the document: the OAuth endpoints, discovery, the
// installation paths, their bodies, statuses and headers. The end-to-end
// tests check every answer of the hub against it.
//
//go:embed openapi.json
var OpenAPI []byte

// openAPIETag names this build's document, so a client that kept it asks
// again cheaply once it is stale.
var openAPIETag = func() string {
	sum := sha256.Sum256(OpenAPI)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
}()

// serveOpenAPI answers with the document. It holds no secret and needs no
// token; it changes only with the hub's version, so a client may keep it
// for an hour and then revalidate it.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("ETag", openAPIETag)
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Header.Get("If-None-Match") == openAPIETag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	w.Write(OpenAPI)
}
