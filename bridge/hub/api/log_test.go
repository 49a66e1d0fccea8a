package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// lamp is a switch whose device always confirms.
type lamp struct{}

func (lamp) State() bridge.State                      { return bridge.State{Value: bridge.Off, Available: true} }
func (lamp) Do(context.Context, bridge.Command) error { return nil }
func (lamp) Supports(bridge.Command) bool             { return true }

// TestCommandLogSaysSwitchedWhenStoringFailed: the device confirmed, the
// hub could not store the new state (a full disk). The command's line must
// say it switched, not that the command was never sent.
func TestCommandLogSaysSwitchedWhenStoringFailed(t *testing.T) {
	h, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home", Switches: []string{"lamp"}}},
		[]*bridge.Switch{{ID: "lamp", Name: "Lamp", Driver: "test", LocationID: 1, Device: lamp{}}}, bridge.SwitchboardOptions{
			Persist: func(bridge.Value, map[string]time.Time, []bridge.AuditRecord) error {
				return errors.New("write switch-values.journal: no space left on device")
			},
		})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c := &Call{Ctx: context.Background(), Params: map[string]string{"command": "on"}, Switchboard: h,
		Grant: &bridge.Grant{SwitchIDs: []string{"lamp"}}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if _, err := commandSwitches(c); wire.StatusOf(err) != 503 {
		t.Fatalf("command = %v, want 503", err)
	}
	c.answered()
	line := logs.String()
	if !strings.Contains(line, "switches=lamp") || !strings.Contains(line, "not_stored=lamp") || !strings.Contains(line, "outcome=switched_not_stored") || strings.Contains(line, "not_sent") {
		t.Errorf("log %q: want lamp's line to say it switched but was not stored", line)
	}
	if strings.Count(line, "\n") != 1 {
		t.Errorf("log %q: want one line", line)
	}
}

// failing is a switch whose device never confirms.
type failing struct{ lamp }

func (failing) Do(context.Context, bridge.Command) error { return errors.New("relay stuck") }

// TestCommandLogOneLinePerCommand: a command writes one line naming its
// switches and outcome, and one warning for each switch that failed.
func TestCommandLogOneLinePerCommand(t *testing.T) {
	var sws []*bridge.Switch
	var ids []string
	for i := range 5 {
		id := string(rune('a' + i))
		var dev bridge.Device = lamp{}
		if i == 3 {
			dev = failing{}
		}
		sws = append(sws, &bridge.Switch{ID: id, Name: id, Driver: "test", LocationID: 1, Device: dev})
		ids = append(ids, id)
	}
	h, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home", Switches: ids}}, sws, bridge.SwitchboardOptions{
		Persist: func(bridge.Value, map[string]time.Time, []bridge.AuditRecord) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func(grant []string) string {
		var logs bytes.Buffer
		c := &Call{Ctx: context.Background(), Params: map[string]string{"command": "on"}, Switchboard: h,
			Grant: &bridge.Grant{LocationID: 1, SwitchIDs: grant}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		commandSwitches(c)
		c.answered()
		return logs.String()
	}
	if got := run([]string{"a", "b", "c"}); strings.Count(got, "\n") != 1 || !strings.Contains(got, "switches=a,b,c") || !strings.Contains(got, "outcome=ok") {
		t.Errorf("all confirmed: log %q, want one ok line naming a,b,c", got)
	}
	got := run(ids)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "outcome=failed") || !strings.Contains(lines[0], "failed=d") ||
		!strings.Contains(lines[1], "switch=d") || !strings.Contains(lines[1], "relay stuck") {
		t.Errorf("one failed: log %q, want the command's line and one warning for d", got)
	}
}

// gateHandler is a slog handler whose Handle waits until release is closed,
// as a journal that is slow to take a line would.
type gateHandler struct {
	slog.Handler
	release chan struct{}
}

func (g gateHandler) Handle(ctx context.Context, r slog.Record) error {
	<-g.release
	return g.Handler.Handle(ctx, r)
}

func (g gateHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return gateHandler{Handler: g.Handler.WithAttrs(as), release: g.release}
}

// TestCommandAnsweredBeforeItsLogLines: a command's 204 is sent before its
// log lines (the command's and the request's) are written, so a client
// does not wait on the log; the lines are all written afterwards.
func TestCommandAnsweredBeforeItsLogLines(t *testing.T) {
	hub, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home", Switches: []string{"lamp"}}},
		[]*bridge.Switch{{ID: "lamp", Name: "Lamp", Driver: "test", LocationID: 1, Device: lamp{}}}, bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	release := make(chan struct{})
	h := New(hub, tokens{"tok-a": "A"}, slog.New(gateHandler{Handler: slog.NewTextHandler(&logs, nil), release: release}), Options{})
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release) // on failure, let the handler finish before the server closes

	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+wire.InstallationsPrefix+"A/switches/on", nil)
		req.Header.Set("Authorization", "Bearer tok-a")
		resp, err := srv.Client().Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	select {
	case status := <-answered:
		if status != http.StatusNoContent {
			t.Fatalf("PUT /switches/on = %d, want 204", status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer while the log lines wait: the 204 waits for its log lines")
	}
	if got := logs.String(); got != "" {
		t.Fatalf("log written before it was released: %q", got)
	}
	release <- struct{}{} // the command's line
	release <- struct{}{} // the request's line
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), "\n") < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	got := logs.String()
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "msg=command") || !strings.Contains(lines[0], "installation=A") ||
		!strings.Contains(lines[0], "outcome=ok") || !strings.Contains(lines[1], `msg="api request"`) || !strings.Contains(lines[1], "status=204") {
		t.Errorf("log %q: want the command's line, then the request's", got)
	}
}

// TestCommandLineAsWithTheInstallationsLogger: the command's line, which
// the handler writes without making a logger for the call, is the line
// the call's logger with the installation id (Call.Logger) writes, byte
// for byte, in both of serve's formats.
func TestCommandLineAsWithTheInstallationsLogger(t *testing.T) {
	noTime := &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}}
	for name, handler := range map[string]func(w *bytes.Buffer) slog.Handler{
		"text": func(w *bytes.Buffer) slog.Handler { return slog.NewTextHandler(w, noTime) },
		"json": func(w *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(w, noTime) },
	} {
		var lazy, made bytes.Buffer
		h := &Handler{logger: slog.New(handler(&lazy)).With("component", "api")}
		logCommand(&Call{handler: h, installation: "inst-1"}, []string{"a", "b"}, bridge.CommandOn, nil, 1500*time.Millisecond)
		withID := slog.New(handler(&made)).With("component", "api").With("installation", "inst-1")
		logCommand(&Call{Logger: withID}, []string{"a", "b"}, bridge.CommandOn, nil, 1500*time.Millisecond)
		if lazy.String() != made.String() || !strings.Contains(lazy.String(), "inst-1") {
			t.Errorf("%s: the handler's line\n%q\nwant the installation logger's\n%q", name, lazy.String(), made.String())
		}
	}
}
