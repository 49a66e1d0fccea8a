package daemon

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
)

// TestServerLogHoldsHandshakeFailures: one line per minute for failed
// handshakes, the next saying how many were not logged; other server
// errors are logged as they come.
func TestServerLogHoldsHandshakeFailures(t *testing.T) {
	logs := &logtest.Buffer{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &serverLog{log: slog.New(slog.NewTextHandler(logs, nil)), every: time.Minute, now: func() time.Time { return now }}
	for range 10 {
		s.Write([]byte("http: TLS handshake error from 192.0.2.1:5000: EOF\n"))
	}
	s.Write([]byte("http: panic serving 192.0.2.1:5001: boom\n"))
	now = now.Add(time.Minute)
	s.Write([]byte("http: TLS handshake error from 192.0.2.2:6000: bad certificate\n"))
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), logs.String())
	}
	if !strings.Contains(lines[0], "failures_not_logged=0") || !strings.Contains(lines[0], "192.0.2.1:5000") {
		t.Errorf("first line: %s", lines[0])
	}
	if !strings.Contains(lines[1], "panic serving") {
		t.Errorf("a handler's panic was not logged as it came: %s", lines[1])
	}
	if !strings.Contains(lines[2], "failures_not_logged=9") || !strings.Contains(lines[2], "bad certificate") {
		t.Errorf("line after a minute: %s", lines[2])
	}
}
