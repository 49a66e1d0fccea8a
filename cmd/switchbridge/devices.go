package main

// The devices commands: what the running hub discovered on its MQTT broker
// (the list it keeps in its database), adopting one into the config file,
// and what to set on a device so it reaches this hub.

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers/mqtt"
)

// discoveredStore is where the running hub keeps what it discovered.
type discoveredStore interface {
	DiscoveredDevices(ctx context.Context) ([]bridge.DiscoveredDevice, error)
}

// deviceJSON is a discovered device in devices --json.
type deviceJSON struct {
	ID       string `json:"id"`
	Firmware string `json:"firmware"`
	Model    string `json:"model,omitempty"`
	Name     string `json:"name,omitempty"`
	Version  string `json:"version,omitempty"`
	Topics   struct {
		Command      string `json:"command,omitempty"`
		State        string `json:"state,omitempty"`
		Availability string `json:"availability,omitempty"`
	} `json:"topics"`
	// Online is what the device last said of itself; null when it has not.
	Online   *bool     `json:"online"`
	Entry    string    `json:"entry"`
	UsedBy   string    `json:"used_by,omitempty"`
	LastSeen time.Time `json:"last_seen"`
	// ClientID and Login are who announced it on the embedded broker.
	ClientID string `json:"client_id,omitempty"`
	Login    string `json:"login,omitempty"`
}

// discovered lists the devices the hub discovered, each marked with the
// switch of the config file that uses it now: the config is what the next
// reload serves, whatever the running hub last wrote.
func (c *invocation) discovered() ([]bridge.DiscoveredDevice, error) {
	devs, err := c.store.DiscoveredDevices(c.ctx)
	if err != nil {
		return nil, err
	}
	used := map[string]string{}
	for _, l := range c.cfg.Locations {
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

func devicesList(fs *flag.FlagSet) func(*invocation) error {
	asJSON := fs.Bool("json", false, "print the devices as a JSON array")
	return func(c *invocation) error {
		devs, err := c.discovered()
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]deviceJSON, len(devs))
			for i, d := range devs {
				o := deviceJSON{ID: d.ID, Firmware: d.Firmware, Model: d.Model, Name: d.Name, Version: d.Version,
					Online: d.Online, Entry: d.Entry, UsedBy: d.UsedBy, LastSeen: d.LastSeen.UTC(), ClientID: d.ClientID, Login: d.Login}
				o.Topics.Command, o.Topics.State, o.Topics.Availability = d.CommandTopic, d.StateTopic, d.AvailabilityTopic
				out[i] = o
			}
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		}
		if len(devs) == 0 {
			fmt.Fprintln(c.stdout, "no devices discovered yet: the hub lists the plugs that announce themselves on its MQTT broker (see \"Discovery\" in drivers/mqtt/README.md)")
			return nil
		}
		for i, d := range devs {
			if i > 0 {
				fmt.Fprintln(c.stdout)
			}
			writeDevice(c.stdout, d)
		}
		return nil
	}
}

// writeDevice prints one discovered device as a block: what it is, its
// topics, its entry, and whether a switch uses it.
func writeDevice(w io.Writer, d bridge.DiscoveredDevice) {
	online := "online unknown"
	if d.Online != nil {
		online = map[bool]string{true: "online", false: "offline"}[*d.Online]
	}
	what := strings.Join(slices.DeleteFunc([]string{d.Firmware, d.Model, d.Version}, func(s string) bool { return s == "" }), " ")
	fmt.Fprintf(w, "%s  %s  %s, last seen %s\n", d.ID, what, online, d.LastSeen.UTC().Format(time.RFC3339))
	if d.Name != "" {
		fmt.Fprintf(w, "  name          %s\n", bridge.Untrusted(d.Name))
	}
	for _, t := range []struct{ k, v string }{{"command", d.CommandTopic}, {"state", d.StateTopic}, {"availability", d.AvailabilityTopic}} {
		if t.v != "" {
			fmt.Fprintf(w, "  %-13s %s\n", t.k, bridge.Untrusted(t.v))
		}
	}
	if d.ClientID != "" {
		fmt.Fprintf(w, "  announced by  client %s, login %s\n", bridge.Untrusted(d.ClientID), bridge.Untrusted(d.Login))
	}
	fmt.Fprintf(w, "  entry         %s\n", d.Entry)
	if d.UsedBy != "" {
		fmt.Fprintf(w, "  in use by switch %s\n", d.UsedBy)
	} else {
		fmt.Fprintf(w, "  adopt with    switchbridge devices adopt %s --location N\n", d.ID)
	}
}

func devicesAdopt(fs *flag.FlagSet) func(*invocation) error {
	var loc locationID
	fs.Var(&loc, "location", "the location `ID` the new switch goes into")
	id := fs.String("id", "", "the new switch's `ID` (default: the one the device's entry proposes)")
	name := fs.String("name", "", "the new switch's `NAME` (default: the device's own)")
	return func(c *invocation) error {
		devs, err := c.discovered()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(devs, func(d bridge.DiscoveredDevice) bool { return d.ID == c.args[0] })
		if i < 0 {
			return fmt.Errorf("no discovered device has the id %q: switchbridge devices lists them", c.args[0])
		}
		dev := devs[i]
		if dev.UsedBy != "" {
			return fmt.Errorf("device %s is already switch %q of %s: nothing to adopt", dev.ID, dev.UsedBy, c.cfg.File)
		}
		if !hasLocation(c.cfg, int64(loc)) {
			return fmt.Errorf("location %d is not in %s (its locations: %s)", loc, c.cfg.File, configLocations(c.cfg))
		}
		a, err := prepareAdoption(c.cfg, dev, *id, *name)
		if err != nil {
			return err
		}
		if err := a.apply(c.cfg.File, int64(loc)); err != nil {
			if config.IsProblems(err) {
				// printError prints the problems alone, one a line.
				fmt.Fprintf(c.stderr, "switchbridge: the config would not pass check-config with the device adopted, so it was left as it was; the problems, at the lines of the file as it would be:\n")
			}
			return err
		}
		fmt.Fprintf(c.stdout, "switch %s added to location %s in %s (the previous file is %s)\n",
			a.switchID, locationLabel(c.locations, int64(loc)), c.cfg.File, a.backup)
		switch {
		case a.password != "":
			fmt.Fprintf(c.stdout, "broker login %s created for it, password %s (shown only now; it is in the config)\n", a.login, a.password)
			c.bindAnnouncer(dev, a.login)
		case a.login != "":
			fmt.Fprintf(c.stdout, "broker login %s now serves it too\n", a.login)
		}
		fmt.Fprintf(c.stdout, "next: sudo systemctl reload switchbridge (the running hub then serves it), and set the device as switchbridge devices setup %s says\n", a.switchID)
		return nil
	}
}

// bindAnnouncer binds the client id the device announced itself with to
// its new login, taking it from the login it connected with (the
// onboarding login binds none; a login of the older form may have): the
// device then logs in with its new login and the same client id, and no
// other login can take that id meanwhile. The binding is the broker's own
// record, in the database, so it holds across restarts and leaves the
// config as the owner wrote it.
func (c *invocation) bindAnnouncer(dev bridge.DiscoveredDevice, login string) {
	if dev.ClientID == "" {
		return
	}
	owner, err := c.store.BindMQTTClientID(c.ctx, dev.ClientID, login, time.Now(), true, mqtt.ClientIDsKept(1))
	if err != nil || owner != login {
		fmt.Fprintf(c.stderr, "switchbridge: the client id %s the device announced itself with could not be bound to login %s (%v): if the broker refuses it, switchbridge mqtt release-client-id %s frees it\n",
			bridge.Untrusted(dev.ClientID), login, err, bridge.Untrusted(dev.ClientID))
		return
	}
	fmt.Fprintf(c.stdout, "client id %s, which the device announced itself with, now belongs to login %s\n", bridge.Untrusted(dev.ClientID), login)
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

// prepareAdoption builds the entry with the id and name asked for, and
// picks the login that will serve it.
func prepareAdoption(cfg *config.Config, dev bridge.DiscoveredDevice, id, name string) (*adoption, error) {
	var entry yaml.Node
	if err := yaml.Unmarshal([]byte(dev.Entry), &entry); err != nil || len(entry.Content) != 1 || entry.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("device %s: its entry is not a switch entry: %q", dev.ID, dev.Entry)
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
		return nil, fmt.Errorf("device %s: its entry does not fit on one line; add it by hand: %s", dev.ID, a.entry)
	}
	_, v := config.Pair(m, "id")
	if v == nil || v.Value == "" {
		return nil, fmt.Errorf("device %s: its entry has no id; give one with --id", dev.ID)
	}
	a.switchID = v.Value
	for _, l := range cfg.Locations {
		for _, sw := range l.Switches {
			if sw.ID == a.switchID {
				return nil, fmt.Errorf("switch id %q is taken (location %d): give another with --id", a.switchID, l.ID)
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
	a.password = newPassword()
	return a, nil
}

// bridgeLogin is, for a device behind a bridge that serves several
// (Zigbee2MQTT), the login that already serves a switch of the same
// bridge: the bridge logs in once for all its devices.
func bridgeLogin(cfg *config.Config, set mqtt.Settings, dev bridge.DiscoveredDevice) string {
	if dev.Firmware != "zigbee2mqtt" {
		return ""
	}
	base, _ := entryOption(dev.Entry, "base_topic")
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

func entryOption(entry, key string) (string, bool) {
	sw, err := entrySwitch(entry)
	if err != nil {
		return "", false
	}
	v := option(sw.Options, key)
	return v, v != ""
}

// option is the scalar value of key in a switch's options, "" when unset.
func option(opts *yaml.Node, key string) string {
	if _, v := config.Pair(opts, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

// newPassword is a plug login's password: 128 random bits in letters and
// digits, which every firmware's settings page and console take as they
// are.
func newPassword() string {
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
// switches and the login into mqtt.users; the result must pass
// check-config before it replaces the file, the previous file kept as
// path.bak.
func (a *adoption) apply(path string, loc int64) error {
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
	if _, _, _, err := checkProblems(path, config.Text(string(text))); err != nil {
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

// writeFileAtomic replaces path with data: a temporary file in the same
// directory, synced, then renamed over it, so a crash leaves the old file
// or the new one, never a part. It takes the mode, owner and group of
// like (the config, root:switchbridge 0640 when packaged), so the service
// can still read it.
func writeFileAtomic(path string, data []byte, like string) error {
	fi, err := os.Stat(like)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	if err := f.Chmod(fi.Mode().Perm()); err != nil {
		f.Close()
		return err
	}
	if err := chownLike(f, fi); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	// The rename itself is durable once the directory is.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// configLocations lists the config's locations as "1 (Home), 2 (Shed)".
func configLocations(cfg *config.Config) string {
	parts := make([]string, len(cfg.Locations))
	for i, l := range cfg.Locations {
		parts[i] = fmt.Sprintf("%d (%s)", l.ID, l.Name)
	}
	return strings.Join(parts, ", ")
}
