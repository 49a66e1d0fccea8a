package bridge

import "time"

// DiscoveredDevice is a switchable device the MQTT driver heard announce
// itself (Tasmota, Shelly, Zigbee2MQTT, Home Assistant discovery), as the
// hub keeps it for the owner's commands: what it is, its topics, and the
// switch entry of the config that would use it.
type DiscoveredDevice struct {
	// ID is stable across the device's restarts (from its MAC, Zigbee
	// address, Shelly id or Home Assistant unique_id).
	ID                string
	Firmware          string
	Model             string
	Name              string
	Version           string
	CommandTopic      string
	StateTopic        string
	AvailabilityTopic string
	// Online is what the device last said of itself; nil when it has not.
	Online *bool
	// Entry is the switch entry (a YAML flow mapping) that would use it.
	Entry string
	// UsedBy is the configured switch that already uses it, "" when none.
	UsedBy   string
	LastSeen time.Time
	// ClientID and Login are the client and the login of the hub's own
	// broker that announced it ("" on another broker): adopting it binds
	// that client id to the device's login.
	ClientID string
	Login    string
}

// MQTTOnboarding is the embedded broker's onboarding window: while it is
// open a device not yet adopted may log in, with the password whose
// SHA-256 is PasswordHash, to announce itself.
type MQTTOnboarding struct {
	PasswordHash []byte
	Opened       time.Time
	Expires      time.Time
}

// OpenAt reports whether the window is open at t.
func (o *MQTTOnboarding) OpenAt(t time.Time) bool {
	return o != nil && len(o.PasswordHash) > 0 && t.Before(o.Expires)
}
