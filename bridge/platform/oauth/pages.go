package oauth

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

//go:embed pages/*.html
var pageFiles embed.FS

// pagesCSS is the pages' stylesheet (StylesheetPath).
//
//go:embed pages/pages.css
var pagesCSS []byte

// StylesheetPath is where the pages' stylesheet is served: a file, not a
// <style> element, so that their Content-Security-Policy allows no inline
// style.
const StylesheetPath = "/oauth/pages.css"

// serveStylesheet answers with the pages' stylesheet, with the pages'
// headers but for caching: a browser may keep it, and asks again before
// it uses it (a new release changes it).
func serveStylesheet(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	http.ServeContent(w, r, "pages.css", time.Time{}, bytes.NewReader(pagesCSS))
}

// pages is parsed at the first page served, not at start: a hub whose
// users never open a login page (one of a platform's, or one only apps
// talk to) neither spends the time nor keeps the parsed templates.
var pages = sync.OnceValue(func() *template.Template {
	return template.Must(template.ParseFS(pageFiles, "pages/*.html"))
})

type pageData struct {
	App       *bridge.App
	Req       *authRequest
	CSRF      string
	Error     string
	Message   string
	User      *bridge.User
	Locations []locationView
	// ReturnTo is the host (or an app's own scheme) the consent page says
	// the user will be sent back to.
	ReturnTo string
	// Notice reports something done (the connected apps page).
	Notice string
	// Connected is the connected apps page's list.
	Connected []connectedView
	// Installation is the id whose switches the change page changes.
	Installation string
	// Next is the console page a login form returns to (return=console);
	// Username fills in the name of a login that confirms who is there
	// (Reauth) before the console shows a secret.
	Next, Username string
	Reauth         bool
}

// pageHeaders sets what every login, consent, connected apps and error
// page carries: wire.PageHeaders, which the demo client's pages carry too.
func pageHeaders(w http.ResponseWriter) { wire.PageHeaders(w) }

func (s *Server) render(w http.ResponseWriter, status int, name string, d pageData) {
	var buf bytes.Buffer
	if err := pages().ExecuteTemplate(&buf, name+".html", d); err != nil {
		s.logger.Error("rendering page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func (s *Server) errorPage(w http.ResponseWriter, status int, msg string) {
	s.render(w, status, "error", pageData{Message: msg})
}
