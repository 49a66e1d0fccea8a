package daemontest

// Every secret a test sends to a hub or gets from one, noted for the scan
// of the hubs' logs (logtest.Watch): the HTTP clients of the tests go
// through SecretRecorder, which reads the secrets off requests and
// answers as they pass, so no test has to list what it made.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
)

// secretFields are the names, in forms, query strings and JSON bodies, of
// the values that are secrets.
var secretFields = map[string]bool{
	"password": true, "client_secret": true, "code": true, "code_verifier": true, "csrf": true,
	"access_token": true, "refresh_token": true, "token": true, "secret": true, "device_code": true, "user_code": true,
}

// SecretRecorder is a RoundTripper that notes the secrets of what passes
// through it (logtest.NoteSecret): the Authorization header (a bearer
// token; Basic's password, and the header's own base64), the secret fields
// of a form body, a query string or a redirect's Location, cookies set,
// the CSRF fields of a page and the secret fields of a JSON answer. It
// reads a request's body only through GetBody, and an answer's body as
// the caller reads it, so a stream is not held up.
type SecretRecorder struct {
	Inner http.RoundTripper
}

// maxSniff is how much of a body the recorder looks at.
const maxSniff = 1 << 20

func (s SecretRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	noteAuthorization(r.Header.Get("Authorization"))
	noteValues(r.URL.Query())
	if r.GetBody != nil && isForm(r.Header.Get("Content-Type")) {
		if body, err := r.GetBody(); err == nil {
			b, _ := io.ReadAll(io.LimitReader(body, maxSniff))
			body.Close()
			if v, err := url.ParseQuery(string(b)); err == nil {
				noteValues(v)
			}
		}
	}
	resp, err := s.Inner.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	for _, c := range resp.Cookies() {
		logtest.NoteSecret(c.Value)
	}
	if loc, err := url.Parse(resp.Header.Get("Location")); err == nil {
		noteValues(loc.Query())
		if f, err := url.ParseQuery(loc.Fragment); err == nil {
			noteValues(f)
		}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.Body != nil && (mt == "application/json" || mt == "text/html") {
		resp.Body = &sniffedBody{ReadCloser: resp.Body, html: mt == "text/html"}
	}
	return resp, nil
}

// isForm reports whether a request's content type is a URL-encoded form.
func isForm(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "application/x-www-form-urlencoded"
}

func noteAuthorization(h string) {
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok {
		return
	}
	logtest.NoteSecret(cred)
	if strings.EqualFold(scheme, "Basic") {
		b, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			return
		}
		_, secret, _ := strings.Cut(string(b), ":")
		logtest.NoteSecret(secret)
		if u, err := url.QueryUnescape(secret); err == nil {
			logtest.NoteSecret(u)
		}
	}
}

func noteValues(v url.Values) {
	for k, vs := range v {
		if secretFields[k] {
			for _, s := range vs {
				logtest.NoteSecret(s)
			}
		}
	}
}

// csrfInPage finds the CSRF fields of a page's forms.
var csrfInPage = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// sniffedBody keeps what the caller reads of an answer, up to maxSniff,
// and notes its secrets when the caller reaches its end or closes it.
type sniffedBody struct {
	io.ReadCloser
	html bool
	mu   sync.Mutex
	buf  bytes.Buffer
	done bool
}

func (b *sniffedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	if b.buf.Len()+n <= maxSniff {
		b.buf.Write(p[:n])
	}
	b.mu.Unlock()
	if err == io.EOF {
		b.note()
	}
	return n, err
}

func (b *sniffedBody) Close() error {
	b.note()
	return b.ReadCloser.Close()
}

func (b *sniffedBody) note() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	if b.html {
		for _, m := range csrfInPage.FindAllSubmatch(b.buf.Bytes(), -1) {
			logtest.NoteSecret(string(m[1]))
		}
		return
	}
	NoteJSONSecrets(b.buf.Bytes())
}

// NoteJSONSecrets notes the secret fields of a JSON document (an answer,
// an admin command's --json output), anywhere in it; anything that is not
// JSON is ignored.
func NoteJSONSecrets(doc []byte) {
	var v any
	if json.Unmarshal(doc, &v) == nil {
		noteJSON(v)
	}
}

// noteJSON notes the string values of secret fields anywhere in v.
func noteJSON(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && secretFields[k] {
				logtest.NoteSecret(s)
			}
			noteJSON(e)
		}
	case []any:
		for _, e := range v {
			noteJSON(e)
		}
	}
}

var recordOnce sync.Once

// RecordSecrets puts a SecretRecorder in front of http.DefaultTransport,
// which the tests' clients (and x/oauth2's) use unless they bring their
// own transport; TLSClient and browsers add one of their own.
func RecordSecrets() {
	recordOnce.Do(func() {
		http.DefaultTransport = SecretRecorder{Inner: http.DefaultTransport}
	})
}

// Main runs a package's tests with the secrets recorded, and says, under
// -v, how much of the hubs' logs the scans read.
func Main(m *testing.M) {
	RecordSecrets()
	code := m.Run()
	if testing.Verbose() {
		fmt.Printf("secret scan: %d secrets looked for in %d logs (%d bytes)\n",
			logtest.SecretsNoted(), logtest.Scanned.Logs.Load(), logtest.Scanned.Bytes.Load())
	}
	os.Exit(code)
}

// transportOf is the *http.Transport under rt (nil: the default one),
// under its recorder if it has one.
func transportOf(rt http.RoundTripper) *http.Transport {
	if rt == nil {
		rt = http.DefaultTransport
	}
	if r, ok := rt.(SecretRecorder); ok {
		rt = r.Inner
	}
	if t, ok := rt.(*http.Transport); ok {
		return t
	}
	if rt != http.DefaultTransport {
		return transportOf(nil)
	}
	return &http.Transport{}
}
