package mqtt

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
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
//	  users:                            # required when listen is not loopback
//	    kitchen: {password: s1, switches: [kitchen]}   # a login and the switches it serves
//	    hall: {password: s2, switches: [hall], client_ids: [DVES_1A2B3C, "shelly1-*"]}   # client ids only this login may use
//	    plug: plugsecret                # the older form: a login tied to no switch
//	  max_packet_size: 65536            # bytes, default 64 KiB
//	  max_clients: 128                  # default 128
//	  max_subscriptions_per_client: 256 # default 256
//	  max_subscriptions_per_login: 1024 # default 1024, all of a login's clients and kept sessions together
//	  max_retained_per_login: 512       # retained messages one login may have the broker keep, default 512
//	  max_retained_bytes_per_login: 1048576   # their topics and payloads, default 1 MiB
//	  mqtt5: false                      # default false: MQTT 3.1.1 and 3.1 only
//
// A switch has, besides id, name and driver: mqtt, a profile: key naming
// its firmware and that firmware's keys, listed in the firmware's file
// (tasmota.go, shelly.go, z2m.go, esphome.go, generic.go); profiles in
// profile.go lists them all.

// Settings is the top-level mqtt: section.
type Settings struct {
	Broker         string           `yaml:"broker"`
	ClientID       string           `yaml:"client_id"`
	Username       string           `yaml:"username"`
	Password       string           `yaml:"password"`
	TLS            *TLSFiles        `yaml:"tls"`
	KeepAlive      config.Duration  `yaml:"keepalive"`
	ConfirmTimeout config.Duration  `yaml:"confirm_timeout"`
	Listen         string           `yaml:"listen"`
	Users          map[string]Login `yaml:"users"`
	MaxPacketSize  int              `yaml:"max_packet_size"`
	MaxClients     int              `yaml:"max_clients"`
	MQTT5          bool             `yaml:"mqtt5"`
	// Bounds of what one client or one login can make the embedded broker
	// hold (see broker_limits.go).
	MaxSubsPerClient      int `yaml:"max_subscriptions_per_client"`
	MaxSubsPerLogin       int `yaml:"max_subscriptions_per_login"`
	MaxRetainedPerLogin   int `yaml:"max_retained_per_login"`
	MaxRetainedBytesLogin int `yaml:"max_retained_bytes_per_login"`

	listenLine int // the line of listen, or of the section
}

// Login is one plug login of the embedded broker: its password and the
// switches whose plugs use it. Written either as the password alone (the
// older form, a login tied to no switch) or as {password, switches}.
type Login struct {
	Password string   `yaml:"password"`
	Switches []string `yaml:"switches"`
	// ClientIDs are the client ids (or, ending in *, prefixes of them) its
	// plugs connect with: no other login may use them.
	ClientIDs []string `yaml:"client_ids"`
	line      int
}

// UnmarshalYAML accepts both forms. Types that unmarshal themselves are left
// out of config.DecodeStrict's key check, so the mapping form is decoded
// strictly here, its problems passed on with their lines.
func (l *Login) UnmarshalYAML(n *yaml.Node) error {
	l.line = n.Line
	if n.Kind == yaml.ScalarNode {
		l.Password = n.Value
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a login is a password or {password: …, switches: [switch ids]}", n.Line)}}
	}
	type plain Login // without the method, so Decode does not recurse
	var p plain
	err := config.DecodeStrict(n, &p)
	*l = Login(p)
	l.line = n.Line
	var ps *config.Problems
	if errors.As(err, &ps) {
		te := &yaml.TypeError{}
		for _, p := range ps.List {
			te.Errors = append(te.Errors, p.String())
		}
		return te
	}
	return err
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
	// DefaultMaxPacketSize bounds what one client can make the embedded
	// broker allocate, logged in or not. Plugs send a few hundred bytes,
	// but a Zigbee2MQTT bridge publishes its whole inventory as one
	// retained message (bridge/devices: one to a few KiB per device, so
	// about a MiB for two hundred), and the broker disconnects a client
	// whose packet is larger, the bridge's devices going offline with it.
	DefaultMaxPacketSize = 1 << 20
	// DefaultMaxClients is room for a house full of plugs.
	DefaultMaxClients = 128
	// DefaultMaxSubsPerClient: a plug subscribes to a handful of filters
	// (Tasmota: its own, up to four group topics and its fallback topic;
	// Shelly and ESPHome one or two), Zigbee2MQTT to its base topic's #
	// and a few more, whatever the number of devices behind it. 256 leaves
	// room for a client that subscribes per device, such as a bridge of
	// 200 devices that takes one filter each.
	DefaultMaxSubsPerClient = 256
	// DefaultMaxSubsPerLogin is four such clients, or 128 plugs of a
	// shared login with eight filters each.
	DefaultMaxSubsPerLogin = 1024
	// DefaultMaxRetainedPerLogin and DefaultMaxRetainedBytesPerLogin are
	// each login's share of the retained messages: a plug retains one to
	// three (its state, its availability), Zigbee2MQTT one or two per
	// device plus a few of its bridge's.
	DefaultMaxRetainedPerLogin      = 512
	DefaultMaxRetainedBytesPerLogin = 1 << 20
	// HubLogin is the embedded broker's login for the hub's own client; no
	// plug login may have this name.
	HubLogin = "switchbridge-hub"
	// Embedded is the broker value that runs a broker inside the hub.
	Embedded = "embedded"
)

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
	if err := config.DecodeSection(n, "mqtt", &s); err != nil {
		return s, err
	}
	switch {
	case s.Broker == "":
		ps.Add(at("broker"), "mqtt.broker is required: tcp://host:1883, ssl://host:8883, ws://host/mqtt or embedded")
	case s.Broker == Embedded:
		if s.Listen == "" {
			s.Listen = DefaultEmbeddedListen
		}
		if l := at("listen"); l != nil {
			s.listenLine = l.Line
		}
		host, _, _ := net.SplitHostPort(s.Listen)
		if err := config.CheckListenSyntax(s.Listen); err != nil {
			ps.Add(at("listen"), "mqtt.listen %q %v", s.Listen, err)
		} else if len(s.Users) == 0 && !isLoopback(host) {
			ps.Add(at("listen"), "mqtt.listen %q is reachable from other machines: add mqtt.users (username: password) so plugs must log in", s.Listen)
		}
		for _, u := range slices.Sorted(maps.Keys(s.Users)) {
			l := s.Users[u]
			switch {
			case u == "" || l.Password == "":
				ps.Add(at("users"), "mqtt.users: every user needs a name and a password")
			case u == HubLogin:
				ps.Add(at("users"), "mqtt.users: %q is the hub's own login; pick another name", u)
			case u == OnboardingLogin:
				ps.Add(at("users"), "mqtt.users: %q is the login new devices announce themselves with while switchbridge devices listen has it open; pick another name", u)
			}
			for _, id := range l.Switches {
				if id == "" {
					ps.Add(&yaml.Node{Line: l.line}, "mqtt.users.%s: a switch id is empty", u)
				}
			}
		}
		switch {
		case s.MaxPacketSize == 0:
			s.MaxPacketSize = DefaultMaxPacketSize
		case s.MaxPacketSize < 1024 || s.MaxPacketSize > maxMQTTPacket:
			ps.Add(at("max_packet_size"), "mqtt.max_packet_size must be between 1024 and %d bytes", maxMQTTPacket)
		}
		switch {
		case s.MaxClients == 0:
			s.MaxClients = DefaultMaxClients
		case s.MaxClients < 1 || s.MaxClients > 10000:
			ps.Add(at("max_clients"), "mqtt.max_clients must be between 1 and 10000")
		}
		for _, b := range []struct {
			key      string
			v        *int
			def, max int
		}{
			{"max_subscriptions_per_client", &s.MaxSubsPerClient, DefaultMaxSubsPerClient, 100000},
			{"max_subscriptions_per_login", &s.MaxSubsPerLogin, DefaultMaxSubsPerLogin, 1000000},
			{"max_retained_per_login", &s.MaxRetainedPerLogin, DefaultMaxRetainedPerLogin, 100000},
			{"max_retained_bytes_per_login", &s.MaxRetainedBytesLogin, DefaultMaxRetainedBytesPerLogin, 1 << 30},
		} {
			switch {
			case *b.v == 0:
				*b.v = b.def
			case *b.v < 1 || *b.v > b.max:
				ps.Add(at(b.key), "mqtt.%s must be between 1 and %d", b.key, b.max)
			}
		}
		checkClientIDs(s.Users, ps)
		if s.Username != "" || s.Password != "" || s.TLS != nil {
			ps.Add(at("broker"), "mqtt.username, password and tls are for an external broker; with broker: embedded, list plug logins under users")
		}
	default:
		u, err := url.Parse(s.Broker)
		if err != nil || u.Host == "" {
			ps.Add(at("broker"), "mqtt.broker %q is not a URL like tcp://host:1883 (or embedded)", config.RedactURL(s.Broker))
			break
		}
		switch u.Scheme {
		case "tcp", "ssl", "ws", "wss":
		default:
			ps.Add(at("broker"), "mqtt.broker %q: the scheme must be tcp, ssl, ws or wss", config.RedactURL(s.Broker))
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
		if s.Listen != "" || len(s.Users) > 0 || s.MaxPacketSize != 0 || s.MaxClients != 0 || s.MQTT5 ||
			s.MaxSubsPerClient != 0 || s.MaxSubsPerLogin != 0 || s.MaxRetainedPerLogin != 0 || s.MaxRetainedBytesLogin != 0 {
			ps.Add(at("listen"), "mqtt.listen, users, max_packet_size, max_clients, mqtt5 and the max_subscriptions and max_retained keys are for broker: embedded")
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

// checkClientIDs checks the client ids the logins claim: each a valid
// client id (or a prefix ending in *), and none claimed by two logins.
func checkClientIDs(users map[string]Login, ps *config.Problems) {
	owner := map[string]string{}
	for _, u := range slices.Sorted(maps.Keys(users)) {
		l := users[u]
		for _, id := range l.ClientIDs {
			bare := strings.TrimSuffix(id, "*")
			if bare == "" || len(bare) > 128 || strings.ContainsAny(bare, "*+#\x00") {
				ps.Add(&yaml.Node{Line: l.line}, "mqtt.users.%s: client id %q must be an id, or a prefix of one ending in *", u, id)
				continue
			}
			for other, by := range owner {
				if by != u && (claims(other, bare) || claims(id, strings.TrimSuffix(other, "*"))) {
					ps.Add(&yaml.Node{Line: l.line}, "mqtt.users.%s: client id %q is also claimed by login %s (%q)", u, id, by, other)
				}
			}
			owner[id] = u
		}
	}
}

// claims reports whether pattern (a client id, or a prefix ending in *)
// covers the client id id.
func claims(pattern, id string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(id, p)
	}
	return pattern == id
}

// maxMQTTPacket is the largest packet MQTT can describe (a 4-byte
// remaining length).
const maxMQTTPacket = 268435455

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

// Check implements drivers.Checker: the embedded broker's logins against
// the switches, once all are added.
// Listens implements drivers.Listener: the embedded broker's address.
func (d *driver) Listens() []drivers.Listen {
	if d.set.Broker != Embedded {
		return nil
	}
	return []drivers.Listen{{Key: "mqtt.listen", Addr: d.set.Listen, Line: d.set.listenLine}}
}

func (d *driver) Check() ([]config.Problem, error) {
	if d.set.Broker != Embedded {
		return nil, nil
	}
	ps := &config.Problems{}
	rules := d.brokerRules()
	served := map[string]bool{}
	legacy := false
	for _, u := range slices.Sorted(maps.Keys(d.set.Users)) {
		l := d.set.Users[u]
		legacy = legacy || len(l.Switches) == 0
		for _, id := range l.Switches {
			if _, ok := d.byID[id]; !ok {
				ps.Add(&yaml.Node{Line: l.line}, "mqtt.users.%s: %q is not an mqtt switch of this config", u, id)
			}
			served[id] = true
		}
		for _, id := range l.ClientIDs {
			if claims(id, d.set.ClientID) {
				ps.Add(&yaml.Node{Line: l.line}, "mqtt.users.%s: client id %q is the hub's own (mqtt.client_id %s)", u, id, d.set.ClientID)
			}
		}
	}
	for _, dev := range d.devs {
		if len(d.set.Users) > 0 && !legacy && !served[dev.id] {
			ps.Add(&yaml.Node{Line: dev.line}, "switch %q: no login in mqtt.users lists it, so its plug could not report; add it to the switches of the login it uses", dev.id)
		}
		for _, t := range slices.Sorted(maps.Keys(dev.plug.routes)) {
			if rules.isCommand(t) {
				ps.Add(&yaml.Node{Line: dev.line}, "switch %q: it reports on %s, which the embedded broker keeps for commands to plugs", dev.id, t)
			}
		}
	}
	return d.warnings(), ps.Err()
}

// warnings are what a config that works could do better.
func (d *driver) warnings() []config.Problem {
	if d.set.Broker != Embedded {
		return nil
	}
	var loose []string
	line := 0
	for _, u := range slices.Sorted(maps.Keys(d.set.Users)) {
		if l := d.set.Users[u]; len(l.Switches) == 0 {
			loose = append(loose, u)
			if line == 0 {
				line = l.line
			}
		}
	}
	if len(loose) == 0 {
		return nil
	}
	return []config.Problem{{Line: line, Msg: fmt.Sprintf("mqtt.users: login(s) %s list no switches, so each can still report the state of every plug no login lists (though not command any); "+
		"give each login its switches: {password: …, switches: [switch ids]}", strings.Join(loose, ", "))}}
}

// brokerRules derives the embedded broker's rules from the logins and the
// switches.
func (d *driver) brokerRules() *brokerRules {
	plugs := make(map[string]*plug, len(d.devs))
	for _, dev := range d.devs {
		plugs[dev.id] = dev.plug
	}
	return newBrokerRules(HubLogin, d.set.ClientID, d.set.Users, plugs)
}
