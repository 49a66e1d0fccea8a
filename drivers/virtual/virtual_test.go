package virtual

import (
	"context"
	"errors"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers"
)

func node(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

func open(t *testing.T, opts string, stored bridge.Value, reload bool) (*Switch, []bridge.Value) {
	t.Helper()
	var notified []bridge.Value
	env := drivers.Env{
		LastValue: func(string) (bridge.Value, bool) { return stored, stored != "" },
		Notify:    func(_ string, st bridge.State) { notified = append(notified, st.Value) },
		Reload:    reload,
	}
	d, err := New(env)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Add(drivers.Spec{ID: "s", Options: node(t, opts)}); err != nil {
		t.Fatalf("Add(%s): %v", opts, err)
	}
	devs, err := d.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return devs["s"].(*Switch), notified
}

func TestStartValue(t *testing.T) {
	cases := []struct {
		opts   string
		stored bridge.Value
		reload bool
		want   bridge.Value
	}{
		{"{}", "", false, bridge.Off},
		{"{}", bridge.On, false, bridge.On},
		{"{initial: on}", "", false, bridge.On},
		{"{initial: off}", bridge.On, false, bridge.Off},
		{"{initial: off}", bridge.On, true, bridge.On}, // a reload keeps the value
	}
	for _, c := range cases {
		sw, notified := open(t, c.opts, c.stored, c.reload)
		if got := sw.State().Value; got != c.want {
			t.Errorf("%s stored %q reload %v: %s, want %s", c.opts, c.stored, c.reload, got, c.want)
		}
		if len(notified) != 1 || notified[0] != c.want {
			t.Errorf("%s: notified %v", c.opts, notified)
		}
	}
}

func TestCommands(t *testing.T) {
	cases := []struct {
		opts    string
		on, off bool
	}{
		{"{}", true, true},
		{"{commands: [on]}", true, false},
		{"{commands: [off]}", false, true},
		{"{commands: []}", false, false}, // read-only
	}
	for _, c := range cases {
		sw, _ := open(t, c.opts, "", false)
		if sw.Supports(bridge.CommandOn) != c.on || sw.Supports(bridge.CommandOff) != c.off {
			t.Errorf("%s: supports on=%v off=%v", c.opts, sw.Supports(bridge.CommandOn), sw.Supports(bridge.CommandOff))
		}
		if !c.off {
			if err := sw.Do(context.Background(), bridge.CommandOff); !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("%s: Do(off) = %v, want ErrUnsupported", c.opts, err)
			}
		}
	}
}

func TestDelayFailAndDeadline(t *testing.T) {
	sw, _ := open(t, "{delay: 10s}", "", false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := sw.Do(ctx, bridge.CommandOn); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow switch past its deadline: %v", err)
	}
	if sw.State().Value != bridge.Off {
		t.Error("a command that timed out changed the value")
	}
	sw, _ = open(t, "{fail: true}", "", false)
	if err := sw.Do(context.Background(), bridge.CommandOn); err == nil || sw.State().Value != bridge.Off {
		t.Errorf("failing switch: %v, value %s", err, sw.State().Value)
	}
}

func TestAddRejects(t *testing.T) {
	for _, opts := range []string{"{initial: maybe}", "{commands: [toggle]}", "{delay: -1s}", "{delay: soon}", "{colour: red}"} {
		d, _ := New(drivers.Env{})
		if err := d.Add(drivers.Spec{ID: "s", Options: node(t, opts), Line: 3}); err == nil {
			t.Errorf("%s accepted", opts)
		}
	}
	if _, err := New(drivers.Env{Settings: node(t, "{x: 1}")}); err == nil {
		t.Error("settings accepted")
	}
}
