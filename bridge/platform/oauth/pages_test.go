package oauth

import (
	"bytes"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
)

// Every page file parses and is found by the name render uses, though
// parsing waits for the first page served.
func TestPagesParse(t *testing.T) {
	files, err := fs.Glob(pageFiles, "pages/*.html")
	if err != nil || len(files) == 0 {
		t.Fatalf("page files: %v %v", files, err)
	}
	for _, f := range files {
		if pages().Lookup(path.Base(f)) == nil {
			t.Errorf("%s: no template", f)
		}
	}
}

// The pages carry no inline style (no <style> element, no style
// attribute: their policy is style-src 'self'), and their stylesheet is
// served as CSS, with the pages' headers and a policy that allows no
// inline script or style.
func TestPagesStyleFromTheirStylesheet(t *testing.T) {
	files, _ := fs.Glob(pageFiles, "pages/*.html")
	for _, f := range files {
		b, _ := fs.ReadFile(pageFiles, f)
		if s := strings.ToLower(string(b)); strings.Contains(s, "<style") || strings.Contains(s, " style=") {
			t.Errorf("%s has an inline style", f)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+StylesheetPath, serveStylesheet)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, StylesheetPath, nil))
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/css") || !bytes.Equal(w.Body.Bytes(), pagesCSS) {
		t.Fatalf("GET %s: %d %q, %d bytes", StylesheetPath, w.Code, w.Header().Get("Content-Type"), w.Body.Len())
	}
	csp := w.Header().Get("Content-Security-Policy")
	if w.Header().Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(csp, "style-src 'self'") || strings.Contains(csp, "unsafe-") {
		t.Errorf("GET %s: nosniff %q, policy %q", StylesheetPath, w.Header().Get("X-Content-Type-Options"), csp)
	}
	if !strings.Contains(string(pagesCSS), "button.secondary") {
		t.Error("the stylesheet lacks the pages' rules")
	}
}
