package drivers_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
)

// fake is a driver that records what happens to it.
type fake struct {
	name     string
	log      *[]string
	failOpen bool
	ids      []string
}

type dev struct{}

func (dev) State() bridge.State { return bridge.State{} }

func (f *fake) Add(s drivers.Spec) error {
	if strings.HasPrefix(s.ID, "bad") {
		return errors.New("bad options")
	}
	f.ids = append(f.ids, s.ID)
	return nil
}

func (f *fake) Open(context.Context) (map[string]bridge.Device, error) {
	*f.log = append(*f.log, "open "+f.name)
	if f.failOpen {
		return nil, errors.New("no hardware")
	}
	out := map[string]bridge.Device{}
	for _, id := range f.ids {
		out[id] = dev{}
	}
	return out, nil
}

func (f *fake) Close() error { *f.log = append(*f.log, "close "+f.name); return nil }

func registry(log *[]string, failing string) drivers.Registry {
	mk := func(name string) drivers.Factory {
		return func(env drivers.Env) (drivers.Driver, error) {
			if env.Settings != nil && name == "broken" {
				return nil, errors.New("bad settings")
			}
			return &fake{name: name, log: log, failOpen: name == failing}, nil
		}
	}
	return drivers.Registry{"a": mk("a"), "b": mk("b"), "mqtt": mk("broken")}
}

func mustConfig(t *testing.T, src string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(src), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestBuildReportsEveryProblem(t *testing.T) {
	var log []string
	cfg := mustConfig(t, `mqtt: {broker: x}
locations:
  - id: 1
    name: Home
    switches:
      - {id: bad1, name: A, driver: a}
      - {id: s2, name: B, driver: nope}
      - {id: m1, name: M, driver: mqtt}
      - {id: m2, name: M2, driver: mqtt}
`)
	_, err := drivers.Build(cfg, registry(&log, ""), drivers.Env{})
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{`x.yaml:6: switch "bad1": bad options`, `x.yaml:7: switch "s2": unknown driver "nope" (known: a, b, mqtt)`, `x.yaml:1: bad settings`} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	if strings.Count(msg, "bad settings") != 1 {
		t.Errorf("a driver's bad settings are reported once, not per switch:\n%s", msg)
	}
	if len(log) != 0 {
		t.Errorf("Build did I/O: %v", log)
	}
}

func TestOpenClosesWhatItOpenedOnFailure(t *testing.T) {
	var log []string
	cfg := mustConfig(t, `locations:
  - id: 1
    name: Home
    switches:
      - {id: s1, name: A, driver: a}
      - {id: s2, name: B, driver: b}
`)
	set, err := drivers.Build(cfg, registry(&log, "b"), drivers.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "driver b: no hardware") {
		t.Fatalf("Open = %v", err)
	}
	if strings.Join(log, ",") != "open a,open b,close a" {
		t.Errorf("log = %v, want a opened, b failed, a closed again", log)
	}

	log = nil
	set, _ = drivers.Build(cfg, registry(&log, ""), drivers.Env{})
	sws, err := set.Open(context.Background())
	if err != nil || len(sws) != 2 || sws[0].ID != "s1" || sws[0].Driver != "a" || sws[1].LocationID != 1 {
		t.Fatalf("Open = %+v, %v", sws, err)
	}
	set.Close()
	if strings.Join(log, ",") != "open a,open b,close b,close a" {
		t.Errorf("log = %v, want closing in reverse order", log)
	}
}

func TestKeepUnchanged(t *testing.T) {
	var log []string
	reg := registry(&log, "")
	cfgA := mustConfig(t, `locations:
  - id: 1
    name: Home
    switches:
      - {id: s1, name: A, driver: a}
      - {id: s2, name: B, driver: b}
`)
	old, _ := drivers.Build(cfgA, reg, drivers.Env{})
	oldSws, err := old.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// b gets a second switch; a is untouched.
	cfgB := mustConfig(t, `locations:
  - id: 1
    name: Home
    switches:
      - {id: s1, name: A, driver: a}
      - {id: s2, name: B, driver: b}
      - {id: s3, name: C, driver: b}
`)
	next, _ := drivers.Build(cfgB, reg, drivers.Env{})
	log = nil
	kept := next.KeepUnchanged(old)
	sws, err := next.OpenReplacing(context.Background(), old)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(kept, ",") != "a" {
		t.Errorf("kept %v, want [a]", kept)
	}
	if strings.Join(log, ",") != "close b,open b" {
		t.Errorf("log = %v: only the changed driver may be closed and reopened", log)
	}
	if len(sws) != 3 || sws[0].Device != oldSws[0].Device {
		t.Errorf("the kept driver's device was not carried over: %+v", sws)
	}
}

// A changed driver is closed right before its replacement opens, not
// before every other driver opens.
func TestOpenReplacingClosesEachJustInTime(t *testing.T) {
	var log []string
	reg := registry(&log, "")
	cfgA := mustConfig(t, `locations:
  - id: 1
    name: Home
    switches:
      - {id: s1, name: A, driver: a}
      - {id: s2, name: B, driver: b}
      - {id: s3, name: C, driver: mqtt}
`)
	old, _ := drivers.Build(cfgA, reg, drivers.Env{})
	if _, err := old.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfgB := mustConfig(t, `locations:
  - id: 1
    name: Home
    switches:
      - {id: s1, name: A2, driver: a}
      - {id: s2, name: B2, driver: b}
`)
	next, _ := drivers.Build(cfgB, reg, drivers.Env{})
	log = nil
	if _, err := next.OpenReplacing(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(log, ","); got != "close broken,close a,open a,close b,open b" {
		t.Errorf("order = %s: removed drivers first, then each changed one just before its replacement", got)
	}
}
