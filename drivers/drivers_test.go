package drivers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"gopkg.in/yaml.v3"

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
	return drivers.Registry{{Name: "a", New: mk("a")}, {Name: "b", New: mk("b")}, {Name: "mqtt", New: mk("broken"), Section: true}}
}

func mustConfig(t *testing.T, src string) *config.Config {
	t.Helper()
	cfg, err := config.Load("x.yaml", config.Text(src))
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

// widget is a driver with a settings section and a metric, registered the
// way a new driver would be.
type widget struct {
	fake
	speed int
	opens prometheus.Counter
}

func (w *widget) Open(context.Context) (map[string]bridge.Device, error) {
	w.opens.Inc()
	*w.log = append(*w.log, fmt.Sprintf("open widget speed %d", w.speed))
	out := map[string]bridge.Device{}
	for _, id := range w.ids {
		out[id] = dev{}
	}
	return out, nil
}

func (w *widget) Close() error {
	*w.log = append(*w.log, fmt.Sprintf("close widget speed %d", w.speed))
	return nil
}

// widgetRegistry has the widget driver (section widget:) and plain, a
// driver without settings.
func widgetRegistry(log *[]string, got **yaml.Node) drivers.Registry {
	newWidget := func(env drivers.Env) (drivers.Driver, error) {
		*got = env.Settings
		var s struct {
			Speed int `yaml:"speed"`
		}
		if err := config.DecodeSection(env.Settings, "widget", &s); err != nil {
			return nil, err
		}
		opens, err := drivers.RegisterCollector(env.Metrics, prometheus.NewCounter(prometheus.CounterOpts{Name: "opens_total", Help: "Opens."}))
		if err != nil {
			return nil, err
		}
		return &widget{fake: fake{name: "widget", log: log}, speed: s.Speed, opens: opens}, nil
	}
	newPlain := func(env drivers.Env) (drivers.Driver, error) {
		return &fake{name: "plain", log: log}, nil
	}
	return drivers.Registry{{Name: "widget", New: newWidget, Section: true}, {Name: "plain", New: newPlain}}
}

const widgetSwitches = `locations:
  - id: 1
    name: Home
    switches:
      - {id: w1, name: W, driver: widget}
      - {id: p1, name: P, driver: plain}
`

// A registered driver with Section gets its top-level section, as written,
// and its own strict decoding reports its keys at their lines.
func TestSettingsSection(t *testing.T) {
	var log []string
	var got *yaml.Node
	reg := widgetRegistry(&log, &got)
	cfg := mustConfig(t, "widget:\n  speed: 3\n"+widgetSwitches)
	if _, err := drivers.Build(cfg, reg, drivers.Env{}); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Kind != yaml.MappingNode || got.Line != 2 || config.Lookup(got, "speed").Value != "3" {
		t.Fatalf("widget settings = %+v, want the mapping at line 2", got)
	}

	cfg = mustConfig(t, "widget:\n  speed: 3\n  sped: 4\n"+widgetSwitches)
	_, err := drivers.Build(cfg, reg, drivers.Env{})
	if err == nil || !strings.Contains(err.Error(), `x.yaml:3: unknown key "sped" in widget`) {
		t.Errorf("a bad key in the section: %v", err)
	}

	// No section: nil settings, not an empty node.
	got = &yaml.Node{}
	if _, err := drivers.Build(mustConfig(t, widgetSwitches), reg, drivers.Env{}); err != nil || got != nil {
		t.Errorf("without a section: settings %+v, err %v", got, err)
	}
}

// The section of a driver no switch uses is checked all the same, so a
// misspelt key is found before a switch needs the driver; the driver is
// neither opened nor does it export metrics.
func TestUnusedSectionChecked(t *testing.T) {
	var log []string
	var got *yaml.Node
	reg := widgetRegistry(&log, &got)
	plainOnly := "locations:\n  - id: 1\n    name: Home\n    switches:\n      - {id: p1, name: P, driver: plain}\n"
	_, err := drivers.Build(mustConfig(t, "widget:\n  speed: 3\n  sped: 4\n"+plainOnly), reg, drivers.Env{})
	if err == nil || !strings.Contains(err.Error(), `x.yaml:3: unknown key "sped" in widget`) {
		t.Errorf("a bad key in an unused driver's section: %v", err)
	}

	prom := prometheus.NewPedanticRegistry()
	set, err := drivers.Build(mustConfig(t, "widget:\n  speed: 3\n"+plainOnly), reg, drivers.Env{Metrics: prom})
	if err != nil {
		t.Fatal(err)
	}
	sws, err := set.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	set.Close()
	if len(sws) != 1 || strings.Join(log, ",") != "open plain,close plain" {
		t.Errorf("switches %v, log %v: only the used driver may open", sws, log)
	}
	if n, err := testutil.GatherAndCount(prom); err != nil || n != 0 {
		t.Errorf("an unused driver exported %d metrics (%v)", n, err)
	}
}

// A top-level key no driver claims is an unknown key at its line, like
// bridge/config's own: a misspelt section, and the name of a driver that
// takes no settings. A section given twice is reported too.
func TestUnclaimedSection(t *testing.T) {
	var log []string
	var got *yaml.Node
	reg := widgetRegistry(&log, &got)
	cfg := mustConfig(t, "server: {listen: 127.0.0.1:0}\nwidgit:\n  speed: 3\nplain: {x: 1}\n"+widgetSwitches)
	_, err := drivers.Build(cfg, reg, drivers.Env{})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`x.yaml:2: unknown key "widgit" (known: audit, data_dir, demo, locations, log, oauth, platform, server, storage, webhooks, widget)`,
		`x.yaml:4: unknown key "plain" (known: audit, data_dir, demo, locations, log, oauth, platform, server, storage, webhooks, widget)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%s", want, err)
		}
	}
	if err := reg.CheckSections(cfg); err == nil || !strings.Contains(err.Error(), `x.yaml:2: unknown key "widgit"`) {
		t.Errorf("CheckSections = %v", err)
	}

	_, err = config.Load("x.yaml", config.Text("widget: {speed: 1}\nwidget: {speed: 2}\n"+widgetSwitches))
	if err == nil || !strings.Contains(err.Error(), `x.yaml:2: mapping key "widget" already defined at line 1`) {
		t.Errorf("a section twice: %v", err)
	}
}

// A change to a driver's settings alone is a change of the driver: a
// reload reopens it, and keeps the others.
func TestKeepUnchangedSeesSettings(t *testing.T) {
	var log []string
	var got *yaml.Node
	reg := widgetRegistry(&log, &got)
	old, err := drivers.Build(mustConfig(t, "widget: {speed: 3}\n"+widgetSwitches), reg, drivers.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	next, err := drivers.Build(mustConfig(t, "widget: {speed: 4}\n"+widgetSwitches), reg, drivers.Env{})
	if err != nil {
		t.Fatal(err)
	}
	log = nil
	kept := next.KeepUnchanged(old)
	if _, err := next.OpenReplacing(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if strings.Join(kept, ",") != "plain" || strings.Join(log, ",") != "close widget speed 3,open widget speed 4" {
		t.Errorf("kept %v, log %v: want plain kept and widget reopened with its new speed", kept, log)
	}
	if s := next.Config().Sections["widget"]; s.Value == nil || config.Lookup(s.Value, "speed").Value != "4" {
		t.Errorf("the set's config has widget %+v, want the settings it was built with", s)
	}
}

// A driver's metrics go to the registerer in its Env, named
// switchbridge_<driver>_..., and run on when a reload builds it again.
func TestDriverMetrics(t *testing.T) {
	var log []string
	var got *yaml.Node
	reg := widgetRegistry(&log, &got)
	prom := prometheus.NewPedanticRegistry()
	for range 2 { // start-up, then a reload on the same registry
		set, err := drivers.Build(mustConfig(t, widgetSwitches), reg, drivers.Env{Metrics: prom})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := set.Open(context.Background()); err != nil {
			t.Fatal(err)
		}
		set.Close()
	}
	want := "# HELP switchbridge_widget_opens_total Opens.\n# TYPE switchbridge_widget_opens_total counter\nswitchbridge_widget_opens_total 2\n"
	if err := testutil.GatherAndCompare(prom, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// A registry no config could be right for fails the first Build loudly.
func TestRegistryMistakes(t *testing.T) {
	mk := func(env drivers.Env) (drivers.Driver, error) { return &fake{}, nil }
	for name, reg := range map[string]drivers.Registry{
		"twice":      {{Name: "a", New: mk}, {Name: "a", New: mk}},
		"bad name":   {{Name: "My-Driver", New: mk}},
		"metrics":    {{Name: "switch", New: mk}},
		"no factory": {{Name: "a"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			drivers.Build(mustConfig(t, "locations: [{id: 1, name: Home, switches: []}]\n"), reg, drivers.Env{})
		}()
	}
}

// reloading is a fake that takes a new config in place when told to.
type reloading struct {
	*fake
	takes bool
}

func (r *reloading) Reload(_ context.Context, next drivers.Driver) (map[string]bridge.Device, bool) {
	*r.log = append(*r.log, fmt.Sprintf("reload %s %v", r.name, r.takes))
	if !r.takes {
		return nil, false
	}
	r.ids = next.(*reloading).ids
	out := map[string]bridge.Device{}
	for _, id := range r.ids {
		out[id] = dev{}
	}
	return out, true
}

// A changed driver that is a Reloader is asked first: taking the change,
// it stays open and serves the new switches; refusing it, it is closed and
// its replacement opened, as any other driver.
func TestOpenReplacingReloadsInPlace(t *testing.T) {
	for _, takes := range []bool{true, false} {
		var log []string
		reg := drivers.Registry{{Name: "r", New: func(drivers.Env) (drivers.Driver, error) {
			return &reloading{fake: &fake{name: "r", log: &log}, takes: takes}, nil
		}}}
		cfg := func(ids ...string) *config.Config {
			src := "locations:\n  - id: 1\n    name: Home\n    switches:\n"
			for _, id := range ids {
				src += fmt.Sprintf("      - {id: %s, name: %s, driver: r}\n", id, id)
			}
			return mustConfig(t, src)
		}
		old, _ := drivers.Build(cfg("s1"), reg, drivers.Env{})
		if _, err := old.Open(context.Background()); err != nil {
			t.Fatal(err)
		}
		next, _ := drivers.Build(cfg("s1", "s2"), reg, drivers.Env{})
		log = nil
		sws, err := next.OpenReplacing(context.Background(), old)
		if err != nil || len(sws) != 2 {
			t.Fatalf("takes %v: %d switches, %v", takes, len(sws), err)
		}
		want := "reload r true"
		if !takes {
			want = "reload r false,close r,open r"
		}
		if got := strings.Join(log, ","); got != want {
			t.Errorf("takes %v: %s, want %s", takes, got, want)
		}
		log = nil
		old.Close()
		next.Close()
		if got := strings.Join(log, ","); got != "close r" {
			t.Errorf("takes %v: closing both sets: %s, want the running driver closed once", takes, got)
		}
	}
}
