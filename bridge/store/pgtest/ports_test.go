package pgtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/porttest"
)

// TestServerMovesOffATakenPort takes the port picked for a server before
// postgres binds it, as another process may between the pick and the
// start: once with a listener that accepts and drops connections, once
// with another PostgreSQL, which answers the readiness query as this
// server would. The server must start on another port, say so, and be the
// server its DSNs reach.
func TestServerMovesOffATakenPort(t *testing.T) {
	skipShort(t)
	if err := Available(); err != nil {
		unavailable(t, err)
	}
	squatter := porttest.Squat(t, "127.0.0.1:0")
	other := Start(t)
	for _, c := range []struct {
		name string
		port int
	}{
		{"a listener", squatter.Port},
		{"another PostgreSQL", other.Port()},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			picks := 0
			var logs []string
			s, err := newServerOn(func() (int, error) {
				picks++
				if picks == 1 {
					return c.port, nil
				}
				return freePort()
			}, func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) })
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			if s.port == c.port || picks != 2 {
				t.Fatalf("server on port %d after %d picks; the first pick, %d, was taken by %s", s.port, picks, c.port, c.name)
			}
			want := fmt.Sprintf("PostgreSQL could not listen on 127.0.0.1:%d: another process took the port", c.port)
			if len(logs) != 1 || !strings.Contains(logs[0], want) {
				t.Errorf("logged %q, want one line with %q", logs, want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var dir string
			if err := s.query(ctx, "SHOW data_directory", &dir); err != nil || dir != s.data {
				t.Errorf("the server on port %d has data directory %q (%v), want %q", s.port, dir, err, s.data)
			}
		})
	}
}
