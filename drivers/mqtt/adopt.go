package mqtt

// What the owner's commands (switchbridge devices) need of the driver
// without running it: whether a discovered device's entry builds the plug
// of a configured switch, the mqtt: section as the driver reads it, and
// which login serves a switch.

import (
	"errors"
	"maps"
	"slices"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
)

// PlugPrint identifies the relay an mqtt switch's keys command and read:
// two switches with the same print are the same relay. It fails as the
// config check does on keys that build no plug.
func PlugPrint(sw config.Switch) (string, error) {
	p, err := buildPlug(drivers.Spec{ID: sw.ID, Name: sw.Name, Options: sw.Options, Line: sw.Line})
	if err != nil {
		return "", err
	}
	return plugPrint(p), nil
}

// ReadSettings reads the config's mqtt: section as the driver does, with
// its defaults filled in (the embedded broker's listen address).
func ReadSettings(cfg *config.Config) (Settings, error) {
	sec, ok := cfg.Sections["mqtt"]
	if !ok {
		return Settings{}, errors.New("the config has no mqtt: section")
	}
	return checkSettings(sec.Value)
}

// LoginOf returns the login of the embedded broker that lists switch id
// among its switches; else, when a login of the older form (a password
// alone) exists, the first of those by name, which may serve any switch;
// "" when none serves it.
func (s Settings) LoginOf(id string) string {
	loose := ""
	for _, name := range slices.Sorted(maps.Keys(s.Users)) {
		l := s.Users[name]
		if slices.Contains(l.Switches, id) {
			return name
		}
		if len(l.Switches) == 0 && loose == "" {
			loose = name
		}
	}
	return loose
}
