package daemontest

// The API's contract, checked on the wire: every answer a test's hub
// gives to a path of the OpenAPI document passes through a validator
// built from the document, so a status, field or body the document does
// not describe fails the test that got it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/switchbridge/switchbridge/bridge/hub/api"
)

// maxChecked is the most of an answer's body the validator reads: far
// more than any answer of the API, and a bound on what a broken hub could
// make a test hold.
const maxChecked = 4 << 20

// Contract validates the exchanges with one hub against the OpenAPI
// document and keeps what did not conform.
type Contract struct {
	router routers.Router
	// events are the schemas of the event stream's data, by event type;
	// opts are the document's options for checking a value by one.
	events map[string]*openapi3.Schema
	opts   []openapi3.SchemaValidationOption
	mu     sync.Mutex
	found  []string
	// Checked counts the answers validated, so a test can tell the
	// validator saw its requests.
	checked int
}

// registerDecoders lets the validator read the bodies of the pages the
// OAuth endpoints answer with (the document says only that they are
// HTML).
var registerDecoders = sync.OnceFunc(func() {
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.FileBodyDecoder)
})

// NewContract builds a validator of the document for a hub at baseURL.
func NewContract(baseURL string) (*Contract, error) {
	registerDecoders()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	// The document leaves its objects open, so that a field added later
	// does not break a client that checks strictly; the hub of this
	// build must answer exactly the fields documented.
	closed := map[*openapi3.Schema]bool{}
	for _, ref := range doc.Components.Schemas {
		closeObjects(ref.Value, closed)
	}
	doc.Servers = openapi3.Servers{{URL: baseURL}}
	r, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	sw, ev := doc.Components.Schemas["Switch"], doc.Components.Schemas["SwitchEvent"]
	if sw == nil || ev == nil {
		return nil, errors.New("the document has no Switch or SwitchEvent schema for the event stream")
	}
	events := map[string]*openapi3.Schema{
		"snapshot": openapi3.NewArraySchema().WithItems(sw.Value),
		"switch":   ev.Value,
	}
	return &Contract{router: r, events: events, opts: doc.GetSchemaValidationOptions()}, nil
}

// closeObjects forbids properties beyond those listed, in s and the
// schemas below it.
func closeObjects(s *openapi3.Schema, seen map[*openapi3.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
		no := false
		s.AdditionalProperties.Has = &no
	}
	for _, p := range s.Properties {
		closeObjects(p.Value, seen)
	}
	if s.Items != nil {
		closeObjects(s.Items.Value, seen)
	}
	for _, list := range []openapi3.SchemaRefs{s.AnyOf, s.OneOf, s.AllOf} {
		for _, r := range list {
			closeObjects(r.Value, seen)
		}
	}
}

// Problems is what did not conform so far.
func (c *Contract) Problems() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.found...)
}

// Checked is how many answers were validated.
func (c *Contract) Checked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checked
}

func (c *Contract) note(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.found = append(c.found, fmt.Sprintf(format, args...))
}

// Transport wraps rt (nil: http.DefaultTransport) with the validator.
func (c *Contract) Transport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return validating{inner: rt, c: c}
}

type validating struct {
	inner http.RoundTripper
	c     *Contract
}

// present checks that a request carries the credentials its operation
// asks for; whether they are good is the hub's to say.
func present(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	req := in.RequestValidationInput.Request
	auth := req.Header.Get("Authorization")
	scheme := in.SecurityScheme
	switch {
	case scheme.Type == "apiKey" && scheme.In == "query":
		if req.URL.Query().Get(scheme.Name) != "" {
			return nil
		}
		return fmt.Errorf("no %s in the query", scheme.Name)
	case scheme.Type == "oauth2", scheme.Type == "http" && strings.EqualFold(scheme.Scheme, "bearer"):
		if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
			return nil
		}
		return errors.New("no bearer token")
	case scheme.Type == "http" && strings.EqualFold(scheme.Scheme, "basic"):
		if len(auth) > 6 && strings.EqualFold(auth[:6], "basic ") {
			return nil
		}
		return errors.New("no Basic credentials")
	}
	return fmt.Errorf("security scheme %s %s unknown to the test", scheme.Type, scheme.Scheme)
}

func (v validating) RoundTrip(r *http.Request) (*http.Response, error) {
	route, params, err := v.c.router.FindRoute(r)
	if err != nil {
		// Not a path of the document (another server, a page, an
		// undocumented method answered 404 or 405).
		return v.inner.RoundTrip(r)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: r.Clone(r.Context()), PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: present, MultiError: true},
	}
	if r.Body != nil && r.Body != http.NoBody {
		if r.GetBody == nil {
			// A body that can be read only once (a stream) is the
			// server's to judge.
			in.Request.Body = http.NoBody
		} else if in.Request.Body, err = r.GetBody(); err != nil {
			return nil, err
		}
	}
	// Tests send hostile requests on purpose; a request the document
	// refuses is a problem only when the hub accepted it.
	reqErr := openapi3filter.ValidateRequest(r.Context(), in)
	resp, err := v.inner.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	what := r.Method + " " + r.URL.Path
	if reqErr != nil && resp.StatusCode < 300 {
		v.c.note("%s: the hub answered %d to a request the document refuses: %v", what, resp.StatusCode, reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		// A stream has no end to read to: its status and headers are
		// checked now, each event's data as the test reads it.
		out.Options.ExcludeResponseBody = true
		resp.Body = &eventChecker{ReadCloser: resp.Body, c: v.c, what: what}
	} else {
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxChecked))
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		out.SetBodyBytes(b)
	}
	if err := openapi3filter.ValidateResponse(r.Context(), out); err != nil {
		v.c.note("%s: the answer %d does not conform: %v", what, resp.StatusCode, err)
	}
	v.c.mu.Lock()
	v.c.checked++
	v.c.mu.Unlock()
	return resp, nil
}

// checkContract puts the validator between the harness's clients and its
// hub, and fails the test at its end with every answer that did not
// conform. A RoundTripper cannot fail a test itself (it may run on
// another goroutine, after the test's function returned).
func (h *Harness) checkContract(tb testing.TB) {
	c, err := NewContract(h.URL)
	if err != nil {
		tb.Fatalf("the OpenAPI document: %v", err)
	}
	h.Contract = c
	h.Client = &http.Client{Transport: c.Transport(h.Client.Transport), Timeout: h.Client.Timeout,
		Jar: h.Client.Jar, CheckRedirect: h.Client.CheckRedirect}
	tb.Cleanup(func() {
		for _, p := range c.Problems() {
			tb.Errorf("OpenAPI contract: %s", p)
		}
	})
}

// eventChecker checks the data of each event of a stream against the
// document's schema for its type, as the stream is read: snapshot, an
// array of Switch; switch, a SwitchEvent.
type eventChecker struct {
	io.ReadCloser
	c     *Contract
	what  string
	line  []byte // the line read so far
	event string
	data  []string
}

func (e *eventChecker) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	b := p[:n]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(e.line)+len(b) > maxChecked {
				e.c.note("%s: a line of the stream over %d bytes", e.what, maxChecked)
				e.line = e.line[:0]
				break
			}
			e.line = append(e.line, b...)
			break
		}
		e.line = append(e.line, b[:i]...)
		b = b[i+1:]
		e.onLine(strings.TrimSuffix(string(e.line), "\r"))
		e.line = e.line[:0]
	}
	return n, err
}

// onLine follows the event stream format: fields until a blank line,
// which ends the event; a line starting with ':' is a comment.
func (e *eventChecker) onLine(l string) {
	if l == "" {
		e.dispatch()
		return
	}
	if strings.HasPrefix(l, ":") {
		return
	}
	field, value, _ := strings.Cut(l, ":")
	value = strings.TrimPrefix(value, " ")
	switch field {
	case "event":
		e.event = value
	case "data":
		e.data = append(e.data, value)
	}
}

func (e *eventChecker) dispatch() {
	event, data := e.event, strings.Join(e.data, "\n")
	e.event, e.data = "", nil
	if data == "" {
		return // retry, or an id alone
	}
	schema := e.c.events[event]
	if schema == nil {
		e.c.note("%s: an event of type %q, which the document does not describe", e.what, event)
		return
	}
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		e.c.note("%s: the data of a %s event is not JSON: %v", e.what, event, err)
		return
	}
	if err := schema.VisitJSON(v, e.c.opts...); err != nil {
		e.c.note("%s: a %s event does not conform: %v", e.what, event, err)
	}
}
