package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// hookReceiver is a webhook receiver for tests with real daemons: it
// answers the confirmation challenge, and then records each delivery, or
// answers 503 while it is down.
type hookReceiver struct {
	URL       string
	mu        sync.Mutex
	down      bool
	attempts  int // deliveries refused while down
	delivered []string
}

func startHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	r := &hookReceiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		var m struct {
			Type string
			Data struct{ Challenge string }
		}
		json.Unmarshal(body, &m)
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case m.Type == "webhook.confirm":
			json.NewEncoder(w).Encode(map[string]string{"challenge": m.Data.Challenge})
		case r.down:
			r.attempts++
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			r.delivered = append(r.delivered, string(body))
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	r.URL = "http://" + ln.Addr().String() + "/hook"
	return r
}

func (r *hookReceiver) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// refused is how many deliveries came while it was down.
func (r *hookReceiver) refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}

func (r *hookReceiver) deliveries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.delivered...)
}

// register registers the receiver as a webhook of the installation at
// endpoint, with its token.
func (r *hookReceiver) register(t *testing.T, endpoint, token string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint+"/webhooks", strings.NewReader(`{"url":"`+r.URL+`"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s/webhooks = %d %s", endpoint, resp.StatusCode, body)
	}
}
