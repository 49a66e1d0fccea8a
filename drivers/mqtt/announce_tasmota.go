package mqtt

// Tasmota's own discovery (SetOption19 0, the default since 9.x): a
// retained JSON object on tasmota/discovery/<MAC>/config at every connect,
// with the device's topic (t), full topic (ft), prefixes (tp), names (dn,
// fn), relay types (rl), module (md), version (sw) and LWT payloads
// (onln, ofln); the readings go to tasmota/discovery/<MAC>/sensors.

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var errEmptyID = errors.New("the announcement names no device")

// tasmotaConfig is the part of tasmota/discovery/<MAC>/config a switch
// entry needs.
type tasmotaConfig struct {
	DeviceName    string    `json:"dn"`
	FriendlyNames []*string `json:"fn"`
	Hostname      string    `json:"hn"`
	MAC           string    `json:"mac"`
	Module        string    `json:"md"`
	Offline       string    `json:"ofln"`
	Online        string    `json:"onln"`
	State         []string  `json:"state"`
	Version       string    `json:"sw"`
	Topic         string    `json:"t"`
	FullTopic     string    `json:"ft"`
	Prefixes      []string  `json:"tp"`
	Relays        []int     `json:"rl"`
}

var macPattern = regexp.MustCompile(`^[0-9A-Fa-f]{12}$`)

// tasmotaRelay is rl's type of a relay (0 none, 2 a light, 3 a shutter).
const tasmotaRelay = 1

// parseTasmotaDiscovery reads the config a device announced on
// tasmota/discovery/<mac>/config: one device per relay. A config whose
// mac is not the topic's is refused: a device announces under its own MAC.
func parseTasmotaDiscovery(mac string, payload []byte) ([]Device, error) {
	if !macPattern.MatchString(mac) {
		return nil, fmt.Errorf("the topic's MAC %q is not 12 hex digits", clip(mac, 20))
	}
	var c tasmotaConfig
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, err
	}
	if !strings.EqualFold(c.MAC, mac) {
		return nil, fmt.Errorf("the config's mac %q is not its topic's %s", clip(c.MAC, 20), mac)
	}
	if c.Topic == "" {
		return nil, errors.New("the config has no topic (t)")
	}
	if len(c.Relays) > 32 {
		c.Relays = c.Relays[:32]
	}
	mac = strings.ToUpper(mac)
	var opts []entryField
	full := c.FullTopic
	if full == "" {
		full = "%prefix%/%topic%/"
	}
	if full != "%prefix%/%topic%/" {
		opts = append(opts, entryField{"full_topic", full})
	}
	prefixes := []string{"cmnd", "stat", "tele"}
	if len(c.Prefixes) == 3 && !slices.Equal(c.Prefixes, prefixes) {
		prefixes = c.Prefixes
		opts = append(opts, entryField{"prefixes", prefixes})
	}
	if strings.Contains(full, "%hostname%") {
		opts = append(opts, entryField{"hostname", c.Hostname})
	}
	if strings.Contains(full, "%id%") {
		opts = append(opts, entryField{"mac", mac})
	}
	if len(c.State) >= 2 && (c.State[0] != "OFF" || c.State[1] != "ON") {
		opts = append(opts, entryField{"state_text", map[string]string{"off": c.State[0], "on": c.State[1]}})
	}
	expand := func(prefix, cmd string) string {
		t := strings.NewReplacer("%prefix%", prefix, "%topic%", c.Topic, "%hostname%", c.Hostname, "%id%", mac).Replace(full)
		if !strings.HasSuffix(t, "/") {
			t += "/"
		}
		return t + cmd
	}
	var relays []int
	for i, t := range c.Relays {
		if t == tasmotaRelay {
			relays = append(relays, i+1)
		}
	}
	online, offline := cmpOr(c.Online, "Online"), cmpOr(c.Offline, "Offline")
	var out []Device
	var errs []error
	for _, n := range relays {
		d := Device{ID: "tasmota-" + mac, Model: clip(c.Module, maxIDLen), Version: clip(c.Version, maxIDLen), Name: c.DeviceName,
			availability: expand(prefixes[2], "LWT"), availableOn: online, availableOff: offline}
		power := "POWER"
		o := slices.Clone(opts)
		if len(relays) > 1 {
			d.ID += "-" + strconv.Itoa(n)
			power += strconv.Itoa(n)
			o = append([]entryField{{"relay", n}}, o...)
		}
		if n-1 < len(c.FriendlyNames) && c.FriendlyNames[n-1] != nil && *c.FriendlyNames[n-1] != "" {
			d.Name = *c.FriendlyNames[n-1]
		}
		d.Topics = DeviceTopics{Command: expand(prefixes[0], power), State: expand(prefixes[1], "RESULT"), Availability: d.availability}
		dev, err := makeDevice(d, "tasmota", append([]entryField{{"topic", c.Topic}}, o...))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, dev)
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
