package wire

import "net/http"

// PageHeaders sets what every HTML page the daemon serves carries, the
// login, consent, connected apps and error pages as the demo client's: no
// framing (clickjacking), no <base> to redirect relative links and forms,
// no scripts, styles only from the page's own origin (a stylesheet, never
// inline; the demo client's page, a client's and not the hub's, keeps its
// inline style), no referrer (a page's query may hold a client's state), no
// content sniffing, no caching. One helper, so that no page is served with
// fewer of them than another.
func PageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}
