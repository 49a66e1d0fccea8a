package gpio

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	"periph.io/x/conn/v3/driver/driverreg"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers"
)

// fakeHost is a platform on gpioreg's registered pins and a table of chip
// lines, with a host init that loads nothing.
type fakeHost struct {
	state   *driverreg.State
	initErr error
	chips   map[string][]gpio.PinIO
}

func (f *fakeHost) platform() platform {
	return platform{
		init: func() (*driverreg.State, error) {
			if f.state == nil {
				return &driverreg.State{}, f.initErr
			}
			return f.state, f.initErr
		},
		byName: gpioreg.ByName,
		chipLine: func(chip string, offset int) (gpio.PinIO, error) {
			lines, ok := f.chips[chip]
			if !ok {
				return nil, fmt.Errorf("no GPIO chip %q", chip)
			}
			if offset >= len(lines) {
				return nil, fmt.Errorf("chip %s has %d lines", chip, len(lines))
			}
			return lines[offset], nil
		},
		names: registeredNames,
	}
}

// recorder is a daemon's side of drivers.Env: stored values and every
// state a driver reported.
type recorder struct {
	mu     sync.Mutex
	stored map[string]bridge.Value
	notes  []note
	logs   bytes.Buffer
}

type note struct {
	id    string
	state bridge.State
}

func (r *recorder) env() drivers.Env {
	return drivers.Env{
		Logger: slog.New(slog.NewTextHandler(lockedWriter{r}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		LastValue: func(id string) (bridge.Value, bool) {
			r.mu.Lock()
			defer r.mu.Unlock()
			v, ok := r.stored[id]
			return v, ok
		},
		Notify: func(id string, st bridge.State) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.notes = append(r.notes, note{id, st})
			if r.stored == nil {
				r.stored = map[string]bridge.Value{}
			}
			r.stored[id] = st.Value
		},
	}
}

type lockedWriter struct{ r *recorder }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.logs.Write(b)
}

func (r *recorder) values(id string) []bridge.Value {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []bridge.Value
	for _, n := range r.notes {
		if n.id == id {
			out = append(out, n.state.Value)
		}
	}
	return out
}

func (r *recorder) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.String()
}

// newTestDriver makes a driver on fake hardware.
func newTestDriver(t *testing.T, h *fakeHost, rec *recorder) *driver {
	t.Helper()
	if h == nil {
		h = &fakeHost{}
	}
	d, err := newDriver(rec.env(), h.platform())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// options parses a switch's driver keys as the config loader hands them
// over: a YAML mapping node.
func options(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatalf("bad test YAML %q: %v", src, err)
	}
	return doc.Content[0]
}

func mustAdd(t *testing.T, d *driver, id, opts string) {
	t.Helper()
	if err := d.Add(drivers.Spec{ID: id, Name: id, Options: options(t, opts), Line: 1}); err != nil {
		t.Fatalf("Add(%s): %v", id, err)
	}
}

func mustOpen(t *testing.T, d *driver) map[string]bridge.Device {
	t.Helper()
	devs, err := d.Open(context.Background())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return devs
}

// eventually polls cond for up to 5 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// stepper replaces an input's sleeps so a test decides when time passes:
// each wait shows up on calls with its duration and returns when the test
// calls step.
type stepper struct {
	calls  chan time.Duration
	resume chan struct{}
}

func newStepper() *stepper {
	return &stepper{calls: make(chan time.Duration), resume: make(chan struct{})}
}

func (s *stepper) wait(ctx context.Context, d time.Duration) bool {
	select {
	case s.calls <- d:
	case <-ctx.Done():
		return false
	}
	select {
	case <-s.resume:
		return true
	case <-ctx.Done():
		return false
	}
}

// next returns the duration the watcher is waiting for.
func (s *stepper) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-s.calls:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("the input watcher did not wait again")
		return 0
	}
}

func (s *stepper) step(t *testing.T) {
	t.Helper()
	select {
	case s.resume <- struct{}{}:
	case <-time.After(5 * time.Second):
		t.Fatal("the input watcher did not resume")
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
