package daemon

import (
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// handshakeLogEvery is how often at most a failed TLS handshake is logged.
const handshakeLogEvery = time.Minute

// serverLog is the log of the daemon's HTTP servers (http.Server.ErrorLog).
// Failed TLS handshakes come from anything on the LAN that opens the port:
// port scanners, plain HTTP sent to the TLS port, clients that do not
// trust the certificate. One line each would let anyone flood the journal
// (and wear the SD card) by opening connections, so they are logged at
// most once per handshakeLogEvery, with a count of those not logged.
// Everything else net/http reports (a panic in a handler) is logged as it
// comes, at warn.
type serverLog struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	last time.Time
	held int
}

func newServerLog(logger *slog.Logger) *log.Logger {
	return log.New(&serverLog{log: logger, every: handshakeLogEvery, now: time.Now}, "", 0)
}

func (s *serverLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	rest, ok := strings.CutPrefix(line, "http: TLS handshake error ")
	if !ok {
		s.log.Warn(line)
		return len(p), nil
	}
	s.mu.Lock()
	now := s.now()
	if !s.last.IsZero() && now.Sub(s.last) < s.every {
		s.held++
		s.mu.Unlock()
		return len(p), nil
	}
	held := s.held
	s.last, s.held = now, 0
	s.mu.Unlock()
	s.log.Warn("a TLS handshake failed (a port scanner, plain HTTP to the TLS port, or a client that does not trust the certificate); logged at most once a minute",
		"handshake", bridge.Untrusted(rest), "failures_not_logged", held)
	return len(p), nil
}
