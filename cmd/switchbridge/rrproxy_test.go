package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/link"
)

// rrProxy is a round-robin reverse proxy in front of several platform
// processes, as a load balancer without sticky sessions: each request
// goes to the next backend, whoever sent it. A backend that refuses the
// connection is skipped for that request, as a load balancer's passive
// health check does (nginx's proxy_next_upstream error), so that a killed
// process costs its clients only the requests it had in flight.
//
// A request may name its backend with the pinHeader, for a test that must
// know which process served which step; every answer says which one did
// in servedHeader. The proxy notes the backend of each hub's long poll in
// flight, and counts the answers of each status.
type rrProxy struct {
	URL string

	backends []*httputil.ReverseProxy
	targets  []atomic.Pointer[url.URL] // where each backend is
	next     atomic.Uint64
	srv      *http.Server

	mu       sync.Mutex
	polls    map[string]map[int]int // hub id → backend → long polls in flight
	statuses map[string]map[int]int // "link" (the hubs') or "client" → status → answers
}

const (
	pinHeader    = "X-Test-Backend"
	servedHeader = "X-Test-Served-By"
)

// dialFailed marks, in a request's context, an attempt whose backend
// refused the connection: nothing reached it, so another may take it.
type dialFailed struct{ failed bool }

type dialFailedKey struct{}

func startRRProxy(t *testing.T, backends ...string) *rrProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &rrProxy{URL: "http://" + ln.Addr().String(), polls: map[string]map[int]int{}, statuses: map[string]map[int]int{"link": {}, "client": {}},
		targets: make([]atomic.Pointer[url.URL], len(backends))}
	for i, b := range backends {
		p.retarget(i, b)
		rp := &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(p.targets[i].Load())
				r.SetXForwarded()
				r.Out.Host = r.In.Host // the platform's public_url is the proxy's
			},
			// Answers stream as they come: the long poll's body, the
			// interim 102s before it.
			FlushInterval: -1,
			ModifyResponse: func(resp *http.Response) error {
				resp.Header.Set(servedHeader, strconv.Itoa(i))
				return nil
			},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				var op *net.OpError
				if errors.As(err, &op) && op.Op == "dial" {
					r.Context().Value(dialFailedKey{}).(*dialFailed).failed = true
					return
				}
				w.Header().Set(servedHeader, strconv.Itoa(i))
				w.WriteHeader(http.StatusBadGateway)
			},
		}
		p.backends = append(p.backends, rp)
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// retarget points backend i at addr: a platform process that could not
// listen where it was to (startServe) listens there instead.
func (p *rrProxy) retarget(i int, addr string) {
	p.targets[i].Store(&url.URL{Scheme: "http", Host: addr})
}

func (p *rrProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The body is kept for a second attempt at another backend.
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	n := len(p.backends)
	first := int(p.next.Add(1)-1) % n
	if pin := r.Header.Get(pinHeader); pin != "" {
		first, _ = strconv.Atoi(pin)
		r.Header.Del(pinHeader)
	}
	rec := &statusRecorder{ResponseWriter: w}
	class := "client"
	if strings.HasPrefix(r.URL.Path, "/api/hub/") {
		class = "link"
	}
	defer func() { p.count(class, rec.status) }()
	for k := range n {
		b := (first + k) % n
		mark := &dialFailed{}
		out := r.Clone(context.WithValue(r.Context(), dialFailedKey{}, mark))
		out.Body = io.NopCloser(bytes.NewReader(body))
		hub, _, _ := r.BasicAuth()
		polling := r.URL.Path == link.ChangesPath && hub != ""
		if polling {
			p.poll(hub, b, 1)
		}
		p.backends[b].ServeHTTP(rec, out)
		if polling {
			p.poll(hub, b, -1)
		}
		if !mark.failed {
			return
		}
	}
	w.WriteHeader(http.StatusBadGateway)
	rec.status = http.StatusBadGateway
}

func (p *rrProxy) poll(hub string, backend, delta int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.polls[hub] == nil {
		p.polls[hub] = map[int]int{}
	}
	p.polls[hub][backend] += delta
}

func (p *rrProxy) count(class string, status int) {
	p.mu.Lock()
	p.statuses[class][status]++
	p.mu.Unlock()
}

// pollingOn returns the backend holding hub's long poll now, -1 when it
// has none or more than one backend has one.
func (p *rrProxy) pollingOn(hub string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	on := -1
	for b, n := range p.polls[hub] {
		if n > 0 {
			if on >= 0 {
				return -1
			}
			on = b
		}
	}
	return on
}

// answered returns how many answers of each status the proxy gave to
// clients and hubs (link true: to the hubs' link requests only).
func (p *rrProxy) answered(link bool) map[int]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[int]int{}
	for class, statuses := range p.statuses {
		if link && class != "link" {
			continue
		}
		for k, v := range statuses {
			m[k] += v
		}
	}
	return m
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if code >= 200 && r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets ReverseProxy flush the answer as it streams.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// pinned is a transport that sends every request to the backend pick
// names, for a client that must alternate between processes.
type pinned struct {
	rt   http.RoundTripper
	pick func() int
}

func (p pinned) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(pinHeader, strconv.Itoa(p.pick()))
	return p.rt.RoundTrip(r)
}
