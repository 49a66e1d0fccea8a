package mqtt

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge/config"
)

// The config this driver reads.
//
// The top-level section, one per config:
//
//	mqtt:
//	  broker: tcp://192.168.1.10:1883   # tcp://, ssl://, ws://, wss:// or the word embedded
//	  client_id: switchbridge-hall      # default switchbridge-<hostname>; must be unique on the broker
//	  username: hub                     # optional
//	  password: secret                  # optional
//	  tls: {ca: /etc/ssl/ca.pem, cert: client.pem, key: client.key}   # ssl:// and wss:// only; all optional
//	  keepalive: 30s                    # default 30s
//	  confirm_timeout: 5s               # default 5s; the hub's command timeout also applies, the earlier wins
//	  # only with broker: embedded
//	  listen: 127.0.0.1:1883            # default 127.0.0.1:1883
//	  users: {plug: plugsecret}         # username: password; required when listen is not loopback
//
// A switch (its keys besides id, name and driver: mqtt):
//
//	profile: tasmota       topic: tasmota_1A2B3C   relay: 2 (POWER2; 0 or absent: POWER)
//	                       full_topic: "%prefix%/%topic%/"  prefixes: [cmnd, stat, tele]
//	                       hostname, mac (for %hostname% and %id%)  state_text: {off: OFF, on: ON}
//	profile: shelly-gen1   device_id: shelly1-328900   relay: 0
//	profile: shelly-rpc    prefix: shellyplus1-a8032ab12345   switch: 0
//	profile: zigbee2mqtt   friendly_name: hall/lamp   base_topic: zigbee2mqtt   endpoint: l1
//	profile: esphome       prefix: livingroom   object_id: lamp   (command_topic, state_topic override)
//	profile: generic       state_topic: x/state   command_topic: x/set (absent: read-only)
//	                       payload_on: ON  payload_off: OFF  state_on/state_off (default: the payloads)
//	                       state_key: a.b (read the value from a JSON payload)
//	                       availability_topic: x/status  payload_available: online  payload_not_available: offline

// Settings is the top-level mqtt: section.
type Settings struct {
	Broker         string            `yaml:"broker"`
	ClientID       string            `yaml:"client_id"`
	Username       string            `yaml:"username"`
	Password       string            `yaml:"password"`
	TLS            *TLSFiles         `yaml:"tls"`
	KeepAlive      config.Duration   `yaml:"keepalive"`
	ConfirmTimeout config.Duration   `yaml:"confirm_timeout"`
	Listen         string            `yaml:"listen"`
	Users          map[string]string `yaml:"users"`
}

// TLSFiles names the PEM files for an ssl:// or wss:// broker. CA replaces
// the system roots; Cert and Key are a client certificate.
type TLSFiles struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Defaults of the mqtt: section.
const (
	DefaultConfirmTimeout = 5 * time.Second
	DefaultKeepAlive      = 30 * time.Second
	DefaultEmbeddedListen = "127.0.0.1:1883"
	// Embedded is the broker value that runs a broker inside the hub.
	Embedded = "embedded"
)

// Options are one switch's keys. Which apply depends on Profile; the others
// must be absent.
type Options struct {
	Profile string `yaml:"profile"`

	// tasmota
	Topic     string     `yaml:"topic"`
	FullTopic string     `yaml:"full_topic"`
	Prefixes  []string   `yaml:"prefixes"`
	Hostname  string     `yaml:"hostname"`
	MAC       string     `yaml:"mac"`
	StateText *StateText `yaml:"state_text"`

	// tasmota, shelly-gen1
	Relay *int `yaml:"relay"`

	// shelly-gen1
	DeviceID string `yaml:"device_id"`

	// shelly-rpc, esphome
	Prefix string `yaml:"prefix"`
	// shelly-rpc
	Switch *int `yaml:"switch"`

	// zigbee2mqtt
	BaseTopic    string `yaml:"base_topic"`
	FriendlyName string `yaml:"friendly_name"`
	Endpoint     string `yaml:"endpoint"`

	// esphome
	ObjectID string `yaml:"object_id"`

	// esphome (overrides), generic
	CommandTopic string `yaml:"command_topic"`
	StateTopic   string `yaml:"state_topic"`

	// generic
	PayloadOn           string `yaml:"payload_on"`
	PayloadOff          string `yaml:"payload_off"`
	StateOn             string `yaml:"state_on"`
	StateOff            string `yaml:"state_off"`
	StateKey            string `yaml:"state_key"`
	AvailabilityTopic   string `yaml:"availability_topic"`
	PayloadAvailable    string `yaml:"payload_available"`
	PayloadNotAvailable string `yaml:"payload_not_available"`
}

// StateText is Tasmota's StateText1 (off) and StateText2 (on).
type StateText struct {
	Off string `yaml:"off"`
	On  string `yaml:"on"`
}

// profileKeys lists the option keys each profile accepts besides profile.
var profileKeys = map[string][]string{
	"tasmota":     {"topic", "relay", "full_topic", "prefixes", "hostname", "mac", "state_text"},
	"shelly-gen1": {"device_id", "relay"},
	"shelly-rpc":  {"prefix", "switch"},
	"zigbee2mqtt": {"base_topic", "friendly_name", "endpoint"},
	"esphome":     {"prefix", "object_id", "command_topic", "state_topic"},
	"generic": {"command_topic", "state_topic", "payload_on", "payload_off", "state_on", "state_off",
		"state_key", "availability_topic", "payload_available", "payload_not_available"},
}

var profileNames = []string{"tasmota", "shelly-gen1", "shelly-rpc", "zigbee2mqtt", "esphome", "generic"}

// checkSettings validates the mqtt: section and fills in defaults.
func checkSettings(n *yaml.Node) (Settings, error) {
	var s Settings
	ps := &config.Problems{}
	at := func(key string) *yaml.Node {
		if v := config.Lookup(n, key); v != nil {
			return v
		}
		return sectionNode(n)
	}
	if n == nil {
		ps.Add(nil, "mqtt switches need a top-level mqtt: section with at least broker (a URL, or embedded)")
		return s, ps.Err()
	}
	if err := config.DecodeStrict(n, &s); err != nil {
		return s, err
	}
	switch {
	case s.Broker == "":
		ps.Add(at("broker"), "mqtt.broker is required: tcp://host:1883, ssl://host:8883, ws://host/mqtt or embedded")
	case s.Broker == Embedded:
		if s.Listen == "" {
			s.Listen = DefaultEmbeddedListen
		}
		host, _, err := net.SplitHostPort(s.Listen)
		if err != nil {
			ps.Add(at("listen"), "mqtt.listen %q is not host:port", s.Listen)
		} else if len(s.Users) == 0 && !isLoopback(host) {
			ps.Add(at("listen"), "mqtt.listen %q is reachable from other machines: add mqtt.users (username: password) so plugs must log in", s.Listen)
		}
		for u, p := range s.Users {
			if u == "" || p == "" {
				ps.Add(at("users"), "mqtt.users: every user needs a name and a password")
				break
			}
		}
		if s.Username != "" || s.Password != "" || s.TLS != nil {
			ps.Add(at("broker"), "mqtt.username, password and tls are for an external broker; with broker: embedded, list plug logins under users")
		}
	default:
		u, err := url.Parse(s.Broker)
		if err != nil || u.Host == "" {
			ps.Add(at("broker"), "mqtt.broker %q is not a URL like tcp://host:1883 (or embedded)", s.Broker)
			break
		}
		switch u.Scheme {
		case "tcp", "ssl", "ws", "wss":
		default:
			ps.Add(at("broker"), "mqtt.broker %q: the scheme must be tcp, ssl, ws or wss", s.Broker)
		}
		if u.User != nil {
			ps.Add(at("broker"), "mqtt.broker: put credentials in mqtt.username and mqtt.password, not in the URL")
		}
		if s.TLS != nil && u.Scheme != "ssl" && u.Scheme != "wss" {
			ps.Add(at("tls"), "mqtt.tls is only used with ssl:// or wss:// brokers")
		}
		if s.TLS != nil && (s.TLS.Cert == "") != (s.TLS.Key == "") {
			ps.Add(at("tls"), "mqtt.tls: cert and key go together")
		}
		if s.Listen != "" || len(s.Users) > 0 {
			ps.Add(at("listen"), "mqtt.listen and mqtt.users are for broker: embedded")
		}
	}
	if s.ClientID != "" && (len(s.ClientID) > 64 || !topicLevel.MatchString(s.ClientID)) {
		ps.Add(at("client_id"), "mqtt.client_id %q must be 1-64 letters, digits, '-', '_' or '.'", s.ClientID)
	}
	if s.KeepAlive < 0 || (s.KeepAlive > 0 && s.KeepAlive.Std() < time.Second) {
		ps.Add(at("keepalive"), "mqtt.keepalive must be at least 1s")
	}
	if s.KeepAlive == 0 {
		s.KeepAlive = config.Duration(DefaultKeepAlive)
	}
	if s.ConfirmTimeout < 0 {
		ps.Add(at("confirm_timeout"), "mqtt.confirm_timeout must be positive")
	}
	if s.ConfirmTimeout == 0 {
		s.ConfirmTimeout = config.Duration(DefaultConfirmTimeout)
	}
	return s, ps.Err()
}

func sectionNode(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return n.Content[0]
	}
	return n
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// topicLevel is what one generated topic level (a client id, a Tasmota
// topic, a device id) may look like.
var topicLevel = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// checkTopic reports a topic the driver would publish or subscribe to that
// is not a plain topic name.
func checkTopic(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("is empty")
	case strings.ContainsAny(t, "+#"):
		return fmt.Errorf("%q contains a wildcard (+ or #)", t)
	case strings.HasPrefix(t, "$"):
		return fmt.Errorf("%q starts with $, which brokers reserve", t)
	case strings.ContainsRune(t, 0):
		return fmt.Errorf("%q contains a NUL byte", t)
	case len(t) > 1024:
		return fmt.Errorf("is longer than 1024 bytes")
	}
	return nil
}
