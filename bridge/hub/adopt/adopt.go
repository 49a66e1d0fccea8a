// Package adopt adopts a device the hub discovered on its MQTT broker into
// the config file: the one code path of switchbridge devices adopt and of
// the owner's console. It inserts the device's switch entry into a
// location and, on the embedded broker with logins, a login of the
// device's own (its password made here, shown once by the caller); the
// new file must pass check-config's checks before it replaces the old
// one, which is kept as config.yaml.bak. Nothing else in the file changes,
// comments included. Serving the new switch is the caller's: a reload.
package adopt

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/mqtt"
)

// Discovered is where the hub keeps the devices it discovered: the hub's
// store.
type Discovered interface {
	DiscoveredDevices(ctx context.Context) ([]bridge.DiscoveredDevice, error)
}

// Store is the hub's store as an adoption needs it: what the hub
// discovered, and which login of the embedded broker each client id
// belongs to.
type Store interface {
	Discovered
	mqtt.ClientIDs
}

// Devices lists the devices the hub discovered, each marked with the
// switch of cfg that uses it now (UsedBy): the config file is what the
// next reload serves, whatever the running hub last wrote.
func Devices(ctx context.Context, st Discovered, cfg *config.Config) ([]bridge.DiscoveredDevice, error) {
	devs, err := st.DiscoveredDevices(ctx)
	if err != nil {
		return nil, err
	}
	used := map[string]string{}
	for _, l := range cfg.Locations {
		for _, sw := range l.Switches {
			if sw.Driver != "mqtt" {
				continue
			}
			if p, err := mqtt.PlugPrint(sw); err == nil {
				used[p] = sw.ID
			}
		}
	}
	for i := range devs {
		devs[i].UsedBy = ""
		if sw, err := entrySwitch(devs[i].Entry); err == nil {
			if p, err := mqtt.PlugPrint(sw); err == nil {
				devs[i].UsedBy = used[p]
			}
		}
	}
	return devs, nil
}

// entrySwitch reads a discovered device's entry as the config reads a
// switch.
func entrySwitch(entry string) (config.Switch, error) {
	var sw config.Switch
	err := yaml.Unmarshal([]byte(entry), &sw)
	return sw, err
}

// Request is an adoption the owner asks for.
type Request struct {
	// Device is the discovered device's id.
	Device string
	// Location is the id of the location the new switch goes into.
	Location int64
	// ID and Name are the new switch's; "" takes the ones the device's
	// entry proposes.
	ID, Name string
}

// Options are what an adoption is done with.
type Options struct {
	Store Store
	// Check checks the config file at path as it would be (text), as
	// check-config does; an error leaves the file as it was. Nil checks
	// with CheckFile over Registry.
	Check    func(path string, text []byte) error
	Registry drivers.Registry
	// Now is when the device's client id is bound to its login;
	// time.Now when nil.
	Now func() time.Time
}

// Result is what an adoption did.
type Result struct {
	Device   bridge.DiscoveredDevice
	SwitchID string
	// Entry is the switch entry added, one line.
	Entry string
	// Login is the embedded broker's login that serves the new switch:
	// made for it when Password is set (shown only now: it is in the
	// config), else one that already served its bridge or its other
	// relays; "" when the broker has no logins or is not the embedded
	// one.
	Login, Password string
	// Backup is where the previous file is.
	Backup string
	// ClientID is the client id the device announced itself with, now
	// bound to Login; "" when none was bound. Unbound, when set, says why
	// that client id could not be bound (the adoption stands).
	ClientID string
	Unbound  error
}

// Adopt adds the discovered device req.Device to location req.Location
// of cfg's file (cfg is that file as it is now) and returns what it did.
// An unknown device, one a switch already uses, a location not in the
// file, a switch id taken or a file that would not pass Check are
// refused, and leave the file as it was.
func Adopt(ctx context.Context, cfg *config.Config, req Request, o Options) (*Result, error) {
	devs, err := Devices(ctx, o.Store, cfg)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(devs, func(d bridge.DiscoveredDevice) bool { return d.ID == req.Device })
	if i < 0 {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no discovered device has the id %q: switchbridge devices lists them", req.Device)
	}
	dev := devs[i]
	if dev.UsedBy != "" {
		return nil, bridge.Errorf(bridge.ECONFLICT, "device %s is already switch %q of %s: nothing to adopt", dev.ID, dev.UsedBy, cfg.File)
	}
	if !slices.ContainsFunc(cfg.Locations, func(l config.Location) bool { return l.ID == req.Location }) {
		return nil, bridge.Errorf(bridge.EINVALID, "location %d is not in %s (its locations: %s)", req.Location, cfg.File, Locations(cfg))
	}
	a, err := prepare(cfg, dev, req.ID, req.Name)
	if err != nil {
		return nil, err
	}
	check := o.Check
	if check == nil {
		check = func(path string, text []byte) error {
			_, _, err := CheckFile(path, o.Registry, config.Text(string(text)))
			return err
		}
	}
	if err := a.apply(cfg.File, req.Location, check); err != nil {
		return nil, err
	}
	r := &Result{Device: dev, SwitchID: a.switchID, Entry: a.entry, Login: a.login, Password: a.password, Backup: a.backup}
	if a.password != "" && dev.ClientID != "" {
		now := time.Now
		if o.Now != nil {
			now = o.Now
		}
		r.ClientID, r.Unbound = bindAnnouncer(ctx, o.Store, dev, a.login, now())
	}
	return r, nil
}

// bindAnnouncer binds the client id the device announced itself with to
// its new login, taking it from the login it connected with (the
// onboarding login binds none; a login of the older form may have): the
// device then logs in with its new login and the same client id, and no
// other login can take that id meanwhile. The binding is the broker's own
// record, in the database, so it holds across restarts and leaves the
// config as the owner wrote it.
func bindAnnouncer(ctx context.Context, st mqtt.ClientIDs, dev bridge.DiscoveredDevice, login string, at time.Time) (string, error) {
	owner, err := st.BindMQTTClientID(ctx, dev.ClientID, login, at, true, mqtt.ClientIDsKept(1))
	if err == nil && owner != login {
		err = fmt.Errorf("it is bound to login %s", bridge.Untrusted(owner))
	}
	if err != nil {
		return "", err
	}
	return dev.ClientID, nil
}

// Locations lists the config's locations as "1 (Home), 2 (Shed)".
func Locations(cfg *config.Config) string {
	parts := make([]string, len(cfg.Locations))
	for i, l := range cfg.Locations {
		parts[i] = fmt.Sprintf("%d (%s)", l.ID, l.Name)
	}
	return strings.Join(parts, ", ")
}

// adoption is what adopting a device adds to the config.
type adoption struct {
	switchID string
	entry    string // the switch entry, one line
	// login is the embedded broker's login that serves the switch: new
	// (password set) or one that already serves the same bridge; "" when
	// the broker has no logins or is not the embedded one.
	login, password string
	backup          string // where the previous file is, once written
}

// prepare builds the entry with the id and name asked for, and picks the
// login that will serve it.
func prepare(cfg *config.Config, dev bridge.DiscoveredDevice, id, name string) (*adoption, error) {
	var entry yaml.Node
	if err := yaml.Unmarshal([]byte(dev.Entry), &entry); err != nil || len(entry.Content) != 1 || entry.Content[0].Kind != yaml.MappingNode {
		return nil, bridge.Errorf(bridge.EINVALID, "device %s: its entry is not a switch entry: %q", dev.ID, dev.Entry)
	}
	m := entry.Content[0]
	for _, kv := range []struct{ key, value string }{{"id", id}, {"name", name}} {
		if kv.value == "" {
			continue
		}
		if _, v := config.Pair(m, kv.key); v != nil {
			v.SetString(kv.value)
			v.Style = 0
		} else {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: kv.key}, &yaml.Node{Kind: yaml.ScalarNode, Value: kv.value})
		}
	}
	m.Style = yaml.FlowStyle
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	a := &adoption{entry: strings.TrimSpace(string(out))}
	if strings.ContainsAny(a.entry, "\r\n") {
		return nil, bridge.Errorf(bridge.EINVALID, "device %s: its entry does not fit on one line; add it by hand: %s", dev.ID, a.entry)
	}
	_, v := config.Pair(m, "id")
	if v == nil || v.Value == "" {
		return nil, bridge.Errorf(bridge.EINVALID, "device %s: its entry has no id; give the new switch one", dev.ID)
	}
	a.switchID = v.Value
	for _, l := range cfg.Locations {
		for _, sw := range l.Switches {
			if sw.ID == a.switchID {
				return nil, bridge.Errorf(bridge.ECONFLICT, "switch id %q is taken (location %d): give the new switch another id", a.switchID, l.ID)
			}
		}
	}
	set, err := mqtt.ReadSettings(cfg)
	if err != nil {
		return nil, err
	}
	if set.Broker != mqtt.Embedded || len(set.Users) == 0 {
		return a, nil
	}
	if login := bridgeLogin(cfg, set, dev); login != "" {
		a.login = login
		return a, nil
	}
	if l, ok := set.Users[dev.Login]; ok && len(l.Switches) > 0 {
		// The device announced itself under a login that serves its other
		// relays: it logs in once for all of them.
		a.login = dev.Login
		return a, nil
	}
	a.login = a.switchID
	for n := 2; set.Users[a.login].Password != "" || a.login == mqtt.HubLogin; n++ {
		a.login = fmt.Sprintf("%s-%d", a.switchID, n)
	}
	a.password = NewPassword()
	return a, nil
}

// bridgeLogin is, for a device behind a bridge that serves several
// (Zigbee2MQTT), the login that already serves a switch of the same
// bridge: the bridge logs in once for all its devices.
func bridgeLogin(cfg *config.Config, set mqtt.Settings, dev bridge.DiscoveredDevice) string {
	if dev.Firmware != "zigbee2mqtt" {
		return ""
	}
	base := ""
	if sw, err := entrySwitch(dev.Entry); err == nil {
		base = option(sw.Options, "base_topic")
	}
	for _, l := range cfg.Locations {
		for _, sw := range l.Switches {
			if sw.Driver != "mqtt" || option(sw.Options, "profile") != "zigbee2mqtt" ||
				cmp.Or(option(sw.Options, "base_topic"), "zigbee2mqtt") != cmp.Or(base, "zigbee2mqtt") {
				continue
			}
			if login := set.LoginOf(sw.ID); login != "" && len(set.Users[login].Switches) > 0 {
				return login
			}
		}
	}
	return ""
}

// option is the scalar value of key in a switch's options, "" when unset.
func option(opts *yaml.Node, key string) string {
	if _, v := config.Pair(opts, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

// NewPassword is a password for a login of the embedded broker (a
// plug's, the onboarding login's): 128 random bits in letters and digits,
// which every firmware's settings page and console take as they are.
func NewPassword() string {
	const alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	b := make([]byte, 22) // 22 × log2(57) ≈ 128 bits
	for i := range b {
		b[i] = alphabet[randIntN(len(alphabet))]
	}
	return string(b)
}

func randIntN(n int) int {
	var b [1]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
		if int(b[0]) < 256-256%n {
			return int(b[0]) % n
		}
	}
}

// apply edits the config file at path: the entry into location loc's
// switches and the login into mqtt.users; the result must pass check
// before it replaces the file, the previous file kept as path.bak.
func (a *adoption) apply(path string, loc int64, check func(path string, text []byte) error) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	e, err := config.NewEdit(old)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	_, locs := config.Pair(e.Root(), "locations")
	var where *yaml.Node
	if locs != nil {
		for _, l := range locs.Content {
			if _, v := config.Pair(l, "id"); v != nil && v.Value == fmt.Sprint(loc) {
				where = l
			}
		}
	}
	if where == nil {
		return fmt.Errorf("%s: location %d not found in the file", path, loc)
	}
	if err := e.AppendItem(where, "switches", a.entry); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if a.login != "" {
		if err := a.addLogin(e); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	text := e.Bytes()
	if err := check(path, text); err != nil {
		return err
	}
	a.backup = path + ".bak"
	if err := writeFileAtomic(a.backup, old, path); err != nil {
		return fmt.Errorf("writing the backup: %w", err)
	}
	return writeFileAtomic(path, text, path)
}

// addLogin adds the new login to mqtt.users, or the switch to the login
// that serves its bridge.
func (a *adoption) addLogin(e *config.Edit) error {
	_, mq := config.Pair(e.Root(), "mqtt")
	_, users := config.Pair(mq, "users")
	if users == nil {
		return errors.New("mqtt.users not found")
	}
	if a.password == "" {
		_, l := config.Pair(users, a.login)
		if l == nil || l.Kind != yaml.MappingNode {
			return fmt.Errorf("mqtt.users.%s is not a {password, switches} mapping; add switch %s to its switches by hand", a.login, a.switchID)
		}
		return e.AppendItem(l, "switches", a.switchID)
	}
	return e.AppendPair(users, a.login, fmt.Sprintf("{password: %s, switches: [%s]}", a.password, a.switchID))
}
