package logtest

// Secrets the tests made or were handed, and the logs they must never be
// in. Helpers that create or receive a secret (a password, a client
// secret, a token, a code, a CSRF token, a webhook or hub secret, a DSN's
// password) note it with NoteSecret; the logs of the daemons a test runs
// are Watched, and each is scanned for every secret noted so far when the
// test ends, after the daemon stopped. A daemon that logged a secret fails
// the test that ran it, the line named.

import (
	"encoding/binary"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// MinSecretLen is the shortest value NoteSecret keeps: a shorter one (a
// test's "pw", "demo") would be found in ordinary words of the log. Every
// secret the daemon makes is far longer.
const MinSecretLen = 8

// secrets is the registry: each form a secret can take in a log line (as
// it is, escaped for a URL, quoted) indexed by its last MinSecretLen
// bytes, so a scan costs one map look-up per byte of log whatever the
// number of secrets.
var secrets struct {
	mu    sync.RWMutex
	forms map[uint64][]secretForm
	n     int
}

type secretForm struct {
	form, secret string
}

// Scanned counts what the scans looked at, for a package's summary.
var Scanned struct {
	Logs, Bytes atomic.Int64
}

// NoteSecret records v as a secret no log may hold. Values shorter than
// MinSecretLen are ignored.
func NoteSecret(v string) {
	if len(v) < MinSecretLen {
		return
	}
	forms := []string{v}
	for _, f := range []string{url.QueryEscape(v), url.PathEscape(v), strings.Trim(strconv.Quote(v), `"`)} {
		if f != v && len(f) >= MinSecretLen {
			forms = append(forms, f)
		}
	}
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	if secrets.forms == nil {
		secrets.forms = map[uint64][]secretForm{}
	}
next:
	for _, f := range forms {
		k := tail(f)
		for _, have := range secrets.forms[k] {
			if have.form == f {
				continue next
			}
		}
		secrets.forms[k] = append(secrets.forms[k], secretForm{f, v})
		if f == v {
			secrets.n++
		}
	}
}

// SecretsNoted is how many distinct secrets NoteSecret kept.
func SecretsNoted() int {
	secrets.mu.RLock()
	defer secrets.mu.RUnlock()
	return secrets.n
}

func tail(s string) uint64 { return binary.LittleEndian.Uint64([]byte(s[len(s)-MinSecretLen:])) }

// Leak is a noted secret found in a log.
type Leak struct {
	Secret string // the secret as noted
	Line   string // the line of the log it is in
}

// Leaks returns each noted secret that text holds, in any of its forms,
// once, with the first line holding it.
func Leaks(text string) []Leak {
	secrets.mu.RLock()
	defer secrets.mu.RUnlock()
	var out []Leak
	seen := map[string]bool{}
	for i := MinSecretLen; i <= len(text); i++ {
		cands, ok := secrets.forms[tail(text[i-MinSecretLen:i])]
		if !ok {
			continue
		}
		for _, c := range cands {
			if seen[c.secret] || !strings.HasSuffix(text[:i], c.form) {
				continue
			}
			seen[c.secret] = true
			start := strings.LastIndexByte(text[:i-len(c.form)], '\n') + 1
			end := strings.IndexByte(text[i:], '\n')
			if end < 0 {
				end = len(text) - i
			}
			out = append(out, Leak{Secret: c.secret, Line: text[start : i+end]})
		}
	}
	return out
}

// Watch scans buf when tb ends, after everything tb registered with
// Cleanup after this call (so call it before registering the daemon's
// stop), and fails tb for each noted secret in it. name says whose log it
// is.
func Watch(tb testing.TB, name string, buf *Buffer) {
	tb.Helper()
	tb.Cleanup(func() {
		text := buf.String()
		Scanned.Logs.Add(1)
		Scanned.Bytes.Add(int64(len(text)))
		for _, l := range Leaks(text) {
			tb.Errorf("%s logged a secret the test made or was handed (%s): %s", name, Redact(l.Secret), l.Line)
		}
	})
}

// Watched is a new Buffer, Watched under name.
func Watched(tb testing.TB, name string) *Buffer {
	tb.Helper()
	b := &Buffer{}
	Watch(tb, name, b)
	return b
}

// Redact names a secret in a test's output without repeating it whole.
func Redact(secret string) string {
	return fmt.Sprintf("%.4s… (%d bytes)", secret, len(secret))
}
