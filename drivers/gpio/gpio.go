// Package gpio drives relays and reads contacts wired to the hub's own GPIO
// lines, through periph.io. An output switch never reads its line back: its
// state is the level the hub last wrote.
package gpio

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
	"periph.io/x/conn/v3/gpio"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
)

// Options are a gpio switch's keys in the config.
type Options struct {
	// Pin is the line's name as periph registers it: the kernel's line name
	// (GPIO17 on Raspberry Pi OS) or a board alias such as "17".
	Pin string `yaml:"pin"`
	// Chip and Line reach a line the kernel left unnamed: a chip by kernel
	// name (gpiochip0), label, device path or number, and the line's offset
	// on it.
	Chip string `yaml:"chip"`
	Line *int   `yaml:"line"`
	// ActiveLow means a low level is "on", as on most relay boards.
	ActiveLow bool `yaml:"active_low"`
	// Mode is output (a relay, the default) or input (a contact).
	Mode string `yaml:"mode"`
	// Startup is what an output does when the daemon starts: restore (the
	// default), off or on.
	Startup string `yaml:"startup"`
	// Pull is an input's bias: up, down or none; unset leaves it as it is.
	Pull string `yaml:"pull"`
	// Debounce is how long an input must hold a new level before it counts.
	Debounce *config.Duration `yaml:"debounce"`
	// Detect is how an input notices changes: edge (the default, falling
	// back to polling when the line cannot report edges) or poll.
	Detect string `yaml:"detect"`
	// PollInterval is how often an input is read when polling, and how often
	// it is re-read while waiting for edges, in case one was missed.
	PollInterval *config.Duration `yaml:"poll_interval"`
}

// Defaults and limits of the input options.
const (
	DefaultDebounce     = 30 * time.Millisecond
	DefaultPollInterval = 100 * time.Millisecond
	maxDebounce         = 10 * time.Second
	minPollInterval     = time.Millisecond
	maxPollInterval     = time.Minute
)

// The values of startup.
const (
	StartupRestore = "restore"
	StartupOff     = "off"
	StartupOn      = "on"
)

// Registration registers the driver under the name gpio. It takes no
// settings section: each switch names its own line.
func Registration() drivers.Registration {
	return drivers.Registration{Name: "gpio", New: New}
}

// New is the driver's factory. The gpio driver takes no settings section.
func New(env drivers.Env) (drivers.Driver, error) {
	return newDriver(env, system)
}

// NewHostless is New on the lines registered in gpioreg alone, without
// loading periph's host drivers: the daemon's tests run the driver on
// gpiotest pins with it, which must not reach the lines of the machine
// the tests run on.
func NewHostless(env drivers.Env) (drivers.Driver, error) {
	return newDriver(env, hostless)
}

func newDriver(env drivers.Env, p platform) (*driver, error) {
	if env.Settings != nil {
		return nil, errors.New("the gpio driver takes no settings section")
	}
	return &driver{env: env.WithDefaults(), host: p, used: map[string]spec{}}, nil
}

type driver struct {
	env  drivers.Env
	host platform
	// wait is how inputs sleep between polls and for debouncing; tests
	// replace it to step through time.
	wait func(ctx context.Context, d time.Duration) bool

	specs []spec
	used  map[string]spec // line key → the switch that named it first

	mu      sync.Mutex
	devices []device // opened, in config order
	open    bool
}

// spec is one switch's checked options.
type spec struct {
	id        string
	line      int // of the switch in the config, for messages
	pin       string
	chip      string
	offset    int
	activeLow bool
	input     bool

	startup string

	pull     gpio.Pull
	edges    bool
	debounce time.Duration
	interval time.Duration
}

// where names the line the way the config did.
func (s spec) where() string {
	if s.pin != "" {
		return s.pin
	}
	return fmt.Sprintf("%s line %d", s.chip, s.offset)
}

// key is the line as the duplicate check sees it. A pin's name is taken
// as periph resolves it on a Raspberry Pi (gpioreg.ByName): a number is
// the GPIO of that number ("17", "017" are GPIO17), and a position on the
// 40-pin header its GPIO ("P1_11" is GPIO17), so two names of one line
// are caught before anything opens it.
func (s spec) key() string {
	if s.pin != "" {
		name := s.pin
		if n, err := strconv.ParseUint(name, 10, 16); err == nil {
			name = "GPIO" + strconv.FormatUint(n, 10)
		} else if g, ok := headerGPIO[name]; ok {
			name = "GPIO" + strconv.Itoa(g)
		}
		return "pin " + name
	}
	return "chip " + s.chip + " line " + strconv.Itoa(s.offset)
}

// headerGPIO is the GPIO behind each GPIO position of the Raspberry Pi's
// 40-pin header (P1_1 is pin 1), as periph registers the aliases.
var headerGPIO = map[string]int{
	"P1_3": 2, "P1_5": 3, "P1_7": 4, "P1_8": 14, "P1_10": 15, "P1_11": 17, "P1_12": 18,
	"P1_13": 27, "P1_15": 22, "P1_16": 23, "P1_18": 24, "P1_19": 10, "P1_21": 9, "P1_22": 25,
	"P1_23": 11, "P1_24": 8, "P1_26": 7, "P1_27": 0, "P1_28": 1, "P1_29": 5, "P1_31": 6,
	"P1_32": 12, "P1_33": 13, "P1_35": 19, "P1_36": 16, "P1_37": 26, "P1_38": 20, "P1_40": 21,
}

// Add checks a switch's options. It does no I/O.
func (d *driver) Add(s drivers.Spec) error {
	var o Options
	ps := &config.Problems{}
	ps.Merge(config.DecodeStrict(s.Options, &o), s.Line)
	if len(ps.List) > 0 {
		return ps.Err()
	}
	at := func(key string) *yaml.Node {
		if key != "" {
			if n := config.Lookup(s.Options, key); n != nil {
				return n
			}
		}
		return &yaml.Node{Line: s.Line}
	}
	bad := func(key, format string, args ...any) {
		ps.Add(at(key), "switch %q: "+format, append([]any{s.ID}, args...)...)
	}

	sp := spec{id: s.ID, line: s.Line, pin: o.Pin, chip: o.Chip, activeLow: o.ActiveLow}
	switch {
	case o.Pin != "" && (o.Chip != "" || o.Line != nil):
		bad("pin", "give either pin or chip and line, not both")
	case o.Pin != "":
	case o.Chip != "" && o.Line != nil:
		sp.offset = *o.Line
		if sp.offset < 0 {
			bad("line", "line must be an offset of 0 or more, not %d", sp.offset)
		}
	case o.Chip != "":
		bad("chip", "chip needs line, the line's offset on the chip")
	case o.Line != nil:
		bad("line", "line needs chip, the GPIO chip it is on")
	default:
		bad("", "gpio needs pin (a line name such as GPIO17) or chip and line")
	}

	switch o.Mode {
	case "", "output":
	case "input":
		sp.input = true
	default:
		bad("mode", "mode must be output or input, not %q", o.Mode)
	}

	if sp.input {
		if o.Startup != "" {
			bad("startup", "startup applies to outputs; an input reports what it reads")
		}
		sp.checkInput(o, bad)
	} else {
		for _, k := range []struct {
			key string
			set bool
		}{{"pull", o.Pull != ""}, {"debounce", o.Debounce != nil}, {"detect", o.Detect != ""}, {"poll_interval", o.PollInterval != nil}} {
			if k.set {
				bad(k.key, "%s applies to mode: input only", k.key)
			}
		}
		switch o.Startup {
		case "":
			sp.startup = StartupRestore
		case StartupRestore, StartupOff, StartupOn:
			sp.startup = o.Startup
		default:
			bad("startup", "startup must be restore, off or on, not %q", o.Startup)
		}
	}

	if len(ps.List) == 0 {
		if prev, dup := d.used[sp.key()]; dup {
			bad("", "%s is already used by switch %q at line %d", sp.where(), prev.id, prev.line)
		}
	}
	if err := ps.Err(); err != nil {
		return err
	}
	d.used[sp.key()] = sp
	d.specs = append(d.specs, sp)
	return nil
}

func (sp *spec) checkInput(o Options, bad func(key, format string, args ...any)) {
	switch o.Pull {
	case "":
		sp.pull = gpio.PullNoChange
	case "up":
		sp.pull = gpio.PullUp
	case "down":
		sp.pull = gpio.PullDown
	case "none":
		sp.pull = gpio.Float
	default:
		bad("pull", "pull must be up, down or none, not %q", o.Pull)
	}
	sp.debounce = DefaultDebounce
	if o.Debounce != nil {
		sp.debounce = o.Debounce.Std()
		if sp.debounce < 0 || sp.debounce > maxDebounce {
			bad("debounce", "debounce must be between 0 and %s, not %s", maxDebounce, sp.debounce)
		}
	}
	switch o.Detect {
	case "", "edge":
		sp.edges = true
	case "poll":
	default:
		bad("detect", "detect must be edge or poll, not %q", o.Detect)
	}
	sp.interval = DefaultPollInterval
	if o.PollInterval != nil {
		sp.interval = o.PollInterval.Std()
		if sp.interval < minPollInterval || sp.interval > maxPollInterval {
			bad("poll_interval", "poll_interval must be between %s and %s, not %s", minPollInterval, maxPollInterval, sp.interval)
		}
	}
}

// device is what Open made of one switch.
type device interface {
	bridge.Device
	id() string
	close() error
}

// Open loads periph's host drivers, then finds every configured line before
// touching any, so a missing line leaves every relay as it was. Then it
// claims the lines one by one, each output with its start-up level in its
// very first write; if one is busy, every line already claimed is released.
func (d *driver) Open(ctx context.Context) (map[string]bridge.Device, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.open {
		return nil, errors.New("gpio driver is already open")
	}
	log := d.env.Logger
	if len(d.specs) == 0 {
		return map[string]bridge.Device{}, nil
	}

	st, err := d.host.init()
	logHostState(log, st)
	if err != nil {
		return nil, fmt.Errorf("loading periph host drivers: %w", err)
	}

	pins := make([]gpio.PinIO, len(d.specs))
	var missing []error
	for i, sp := range d.specs {
		p, err := d.find(sp)
		if err != nil {
			missing = append(missing, fmt.Errorf("switch %q: %w", sp.id, err))
			continue
		}
		pins[i] = p
	}
	if len(missing) > 0 {
		return nil, errors.Join(missing...)
	}

	opened := make([]device, 0, len(d.specs))
	fail := func(err error) (map[string]bridge.Device, error) {
		var errs []error
		for i := len(opened) - 1; i >= 0; i-- {
			if cerr := opened[i].close(); cerr != nil {
				errs = append(errs, cerr)
			}
		}
		if len(errs) > 0 {
			log.Warn("releasing GPIO lines after a failed start", "err", errors.Join(errs...))
		}
		return nil, err
	}
	for i, sp := range d.specs {
		if err := ctx.Err(); err != nil {
			return fail(fmt.Errorf("opening GPIO lines: %w", err))
		}
		if err := claim(pins[i], sp.id); err != nil {
			return fail(fmt.Errorf("switch %q: GPIO line %s is %w", sp.id, sp.where(), err))
		}
		var dev device
		if sp.input {
			dev, err = d.openContact(sp, pins[i])
		} else {
			dev, err = d.openRelay(sp, pins[i])
		}
		if err != nil {
			// periph may have half-configured the line before failing.
			_ = releaseLine(pins[i])
			unclaim(pins[i])
			return fail(fmt.Errorf("switch %q: GPIO line %s: %w", sp.id, sp.where(), err))
		}
		opened = append(opened, dev)
	}

	out := make(map[string]bridge.Device, len(opened))
	for _, dev := range opened {
		out[dev.id()] = dev
		d.env.Notify(dev.id(), dev.State())
		if c, ok := dev.(*contact); ok {
			c.start()
		}
	}
	d.devices = opened
	d.open = true
	return out, nil
}

// find resolves a switch's line without touching it.
func (d *driver) find(sp spec) (gpio.PinIO, error) {
	if sp.pin == "" {
		p, err := d.host.chipLine(sp.chip, sp.offset)
		if err != nil {
			return nil, fmt.Errorf("GPIO line %s: %w", sp.where(), err)
		}
		return p, nil
	}
	if p := d.host.byName(sp.pin); p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("GPIO line %q not found%s", sp.pin, d.knownHint())
}

// knownHint lists a few registered line names, so a typo is easy to spot.
func (d *driver) knownHint() string {
	const show = 12
	names := d.host.names()
	switch {
	case len(names) == 0:
		return " (no GPIO lines are registered: see the periph host driver messages logged before this; the daemon needs access to /dev/gpiochip*, group gpio on Raspberry Pi OS)"
	case len(names) > show:
		return fmt.Sprintf(" (known: %s, and %d more)", strings.Join(names[:show], ", "), len(names)-show)
	default:
		return fmt.Sprintf(" (known: %s)", strings.Join(names, ", "))
	}
}

// Close stops the input watchers and releases every line. What a released
// line does next is up to the kernel's pin controller.
func (d *driver) Close() error {
	d.mu.Lock()
	devs := d.devices
	d.devices = nil
	d.open = false
	d.mu.Unlock()
	var errs []error
	for i := len(devs) - 1; i >= 0; i-- {
		if err := devs[i].close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// level is the line level that puts a switch in state v.
func level(v bridge.Value, activeLow bool) gpio.Level {
	return gpio.Level((v == bridge.On) != activeLow)
}

// value is the switch state a line level stands for.
func value(l gpio.Level, activeLow bool) bridge.Value {
	if bool(l) != activeLow {
		return bridge.On
	}
	return bridge.Off
}
