package main

// The devices commands: what the running hub discovered on its MQTT broker
// (the list it keeps in its database), adopting one into the config file
// (bridge/hub/adopt, which the owner's console adopts through too), and
// what to set on a device so it reaches this hub.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/hub/adopt"
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
// switch of the config file that uses it now.
func (c *invocation) discovered() ([]bridge.DiscoveredDevice, error) {
	return adopt.Devices(c.ctx, c.store, c.cfg)
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
		check := func(path string, text []byte) error {
			_, _, _, err := checkProblems(path, config.Text(string(text)))
			return err
		}
		a, err := adopt.Adopt(c.ctx, c.cfg, adopt.Request{Device: c.args[0], Location: int64(loc), ID: *id, Name: *name},
			adopt.Options{Store: c.store, Check: check})
		if err != nil {
			if config.IsProblems(err) {
				// printError prints the problems alone, one a line.
				fmt.Fprintf(c.stderr, "switchbridge: the config would not pass check-config with the device adopted, so it was left as it was; the problems, at the lines of the file as it would be:\n")
			}
			return err
		}
		fmt.Fprintf(c.stdout, "switch %s added to location %s in %s (the previous file is %s)\n",
			a.SwitchID, locationLabel(c.locations, int64(loc)), c.cfg.File, a.Backup)
		switch {
		case a.Password != "":
			fmt.Fprintf(c.stdout, "broker login %s created for it, password %s (shown only now; it is in the config)\n", a.Login, a.Password)
		case a.Login != "":
			fmt.Fprintf(c.stdout, "broker login %s now serves it too\n", a.Login)
		}
		switch dev := a.Device; {
		case a.ClientID != "":
			fmt.Fprintf(c.stdout, "client id %s, which the device announced itself with, now belongs to login %s\n", bridge.Untrusted(a.ClientID), a.Login)
		case a.Unbound != nil:
			fmt.Fprintf(c.stderr, "switchbridge: the client id %s the device announced itself with could not be bound to login %s (%v): if the broker refuses it, switchbridge mqtt release-client-id %s frees it\n",
				bridge.Untrusted(dev.ClientID), a.Login, a.Unbound, bridge.Untrusted(dev.ClientID))
		}
		fmt.Fprintf(c.stdout, "next: sudo systemctl reload switchbridge (the running hub then serves it), and set the device as switchbridge devices setup %s says\n", a.SwitchID)
		return nil
	}
}
