package mqtt

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
)

// testHub is a hub built from a config through the driver registry, as the
// daemon builds it.
type testHub struct {
	*bridge.Switchboard
	set   *drivers.Set
	notes *notes
}

// notes records what the driver told the hub.
type notes struct {
	mu   sync.Mutex
	last map[string]bridge.State
	n    int
}

func (n *notes) notify(id string, st bridge.State) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.last[id] = st
	n.n++
}

func (n *notes) get(id string) (bridge.State, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st, ok := n.last[id]
	return st, ok
}

// startHub parses cfg (a whole config), opens its drivers and closes them
// at the end of the test.
func startHub(t testing.TB, cfg string) *testHub {
	t.Helper()
	c, err := config.Load("test.yaml", config.Text(cfg))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, cfg)
	}
	nt := &notes{last: map[string]bridge.State{}}
	set, err := drivers.Build(c, drivers.Registry{Registration()}, drivers.Env{Notify: nt.notify})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sws, err := set.Open(ctx)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := set.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	var locs []bridge.Location
	for _, l := range c.Locations {
		loc := bridge.Location{ID: l.ID, Name: l.Name}
		for _, s := range l.Switches {
			loc.Switches = append(loc.Switches, s.ID)
		}
		locs = append(locs, loc)
	}
	// The switchboard's bound on a command is left to confirm_timeout:
	// longer than any a test here sets (20 s at most).
	h, err := bridge.NewSwitchboard(locs, sws, bridge.SwitchboardOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &testHub{Switchboard: h, set: set, notes: nt}
}

// hubConfig makes a config with an mqtt: section and one location holding
// switches, each a flow mapping without the driver key.
func hubConfig(mqttSection string, switches ...string) string {
	var b strings.Builder
	b.WriteString("server: {metrics_listen: \"off\"}\n")
	b.WriteString("mqtt:\n")
	for _, l := range strings.Split(strings.TrimSpace(mqttSection), "\n") {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("locations:\n  - id: 1\n    name: Home\n    switches:\n")
	for _, s := range switches {
		fmt.Fprintf(&b, "      - {driver: mqtt, %s}\n", s)
	}
	return b.String()
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *testHub) state(t testing.TB, id string) bridge.State {
	t.Helper()
	sts, err := h.States([]string{id})
	if err != nil {
		t.Fatal(err)
	}
	return sts[0].State
}

// failures maps each failed switch of a command error to its reason.
func failures(err error) map[string]string {
	out := map[string]string{}
	if e, ok := err.(*bridge.Error); ok {
		for _, f := range e.Failures {
			out[f.SwitchID] = f.Reason
		}
	}
	return out
}

// mustNode parses a YAML mapping into the node a driver is given.
func mustNode(t testing.TB, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// testEnv is a driver environment with settings parsed from src.
func testEnv(t testing.TB, src string) drivers.Env {
	return drivers.Env{Settings: mustNode(t, src)}
}
