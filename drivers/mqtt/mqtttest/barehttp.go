package mqtttest

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// StartBareHTTP serves the least an HTTP API can do to switch N Tasmota
// plugs: PUT /switches/on|off publishes the N commands and answers 204 once
// each plug has confirmed, through a Floor of its own. No authentication,
// no storage, no metrics, no logging: benchmarks use it as the reference
// for "an HTTP call that switches N plugs and waits for each". It listens
// on a free loopback port until the test ends and returns its base URL.
func StartBareHTTP(tb testing.TB, broker string, topics []string) string {
	tb.Helper()
	f := NewFloor(tb, broker, topics)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := BareHTTPServer(f)
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// BareHTTPServer is StartBareHTTP's server, for a process of its own.
func BareHTTPServer(f *Floor) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /switches/{cmd}", func(w http.ResponseWriter, r *http.Request) {
		cmd := r.PathValue("cmd")
		if cmd != "on" && cmd != "off" {
			http.Error(w, "unknown command", http.StatusNotFound)
			return
		}
		if err := f.SwitchAll(strings.ToUpper(cmd), 5*time.Second); err != nil {
			http.Error(w, err.Error(), http.StatusGatewayTimeout)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}
