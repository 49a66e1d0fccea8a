package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchbridge/switchbridge/bridge/wire"
)

// The document is valid OpenAPI 3.1, and it is the one in the repository.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	file, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, OpenAPI) {
		t.Fatal("the embedded document is not openapi.json")
	}
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate: %v", err)
	}
	for _, name := range []string{"bearer", "oauth2", "clientBasic"} {
		if doc.Components.SecuritySchemes[name] == nil {
			t.Errorf("no security scheme %s", name)
		}
	}
	for _, name := range []string{"WWW-Authenticate", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if doc.Components.Headers[name] == nil {
			t.Errorf("no header %s", name)
		}
	}
}

// Every route of the app's table is in the document, under the
// installation path and its legacy alias, with the method the router
// serves; the document has no installation path the router lacks.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	router, err := NewRouter(SwitchesApp)
	if err != nil {
		t.Fatal(err)
	}
	// The document's variables stand for what a client sends; a
	// command is a literal on or off.
	example := strings.NewReplacer("{switchId}", "kitchen", "{command}", "on", "{webhookId}", "w1")
	documented := 0
	for _, prefix := range []string{wire.InstallationsPrefix, wire.LegacyInstallationsPrefix} {
		base := prefix + "{installationId}"
		for path, item := range doc.Paths.Map() {
			below, ok := strings.CutPrefix(path, base)
			if !ok {
				continue
			}
			for method := range item.Operations() {
				documented++
				if rt, _, _ := router.Match(method, example.Replace(below)); rt == nil {
					t.Errorf("%s %s is documented but not served", method, path)
				}
			}
		}
		for _, rt := range SwitchesApp {
			var paths []string
			for _, seg := range strings.Split(strings.TrimPrefix(rt.Path, "/"), "/") {
				switch seg {
				case ":id":
					if rt.Path == "/switches/:id" || rt.Path == "/switches/:id/:command" {
						seg = "{switchId}"
					} else {
						seg = "{webhookId}"
					}
				case ":command":
					seg = "{command}"
				}
				paths = append(paths, seg)
			}
			p := base + "/" + strings.Join(paths, "/")
			if strings.HasSuffix(p, "/switches/{command}") {
				// The group command is one path per command.
				for _, c := range []string{"on", "off"} {
					if doc.Paths.Find(strings.TrimSuffix(p, "{command}")+c).GetOperation(rt.Method) == nil {
						t.Errorf("%s %s: not documented", rt.Method, p)
					}
				}
				continue
			}
			if item := doc.Paths.Find(p); item == nil || item.GetOperation(rt.Method) == nil {
				t.Errorf("%s %s: not documented", rt.Method, p)
			}
		}
	}
	if documented < 2*len(SwitchesApp) {
		t.Errorf("%d installation operations documented, want at least %d", documented, 2*len(SwitchesApp))
	}
}

// The document is served as it is, without a token, with the caching
// headers a client revalidates by.
func TestOpenAPIServed(t *testing.T) {
	mux := http.NewServeMux()
	New(nil, nil, nil, Options{}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + OpenAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, OpenAPI) {
		t.Fatalf("answered %d with %d bytes, want 200 and the document", resp.StatusCode, len(body))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age=3600" {
		t.Errorf("Cache-Control %q", cc)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+OpenAPIPath, nil)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	again, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusNotModified {
		t.Errorf("with its ETag: %d, want 304", again.StatusCode)
	}
}
