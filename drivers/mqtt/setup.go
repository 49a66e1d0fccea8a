package mqtt

// What to set on a device so that it reaches this hub as a configured
// switch expects (switchbridge devices setup): per firmware, the console
// line, settings page or configuration block with the broker's address,
// the plug's login and the switch's topic filled in.

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/switchbridge/switchbridge/bridge/config"
)

// Setup is what a device needs to reach the hub's broker.
type Setup struct {
	Host, Port string
	// User and Password are the plug's login ("" with no login; for an
	// external broker the owner's own, which the hub does not know).
	User, Password string
	// Note says what the hub could not tell (an address only the owner
	// knows, a login of an external broker).
	Note string
}

// SetupFor is what the device of switch sw sets to reach the broker of s;
// publicHost is the host of server.public_url, the hub's address on the
// LAN when the broker listens on every address. The password is left as
// a placeholder unless showPassword.
func (s Settings) SetupFor(sw config.Switch, publicHost string, showPassword bool) Setup {
	var st Setup
	if s.Broker == Embedded {
		host, port, _ := net.SplitHostPort(s.Listen)
		st.Port = port
		switch ip := net.ParseIP(host); {
		case host == "" || ip != nil && ip.IsUnspecified():
			st.Host = publicHost
		default:
			st.Host = host
		}
		if ip := net.ParseIP(st.Host); st.Host == "" || st.Host == "localhost" || ip != nil && ip.IsLoopback() {
			st.Note = "the broker listens on " + s.Listen + ", which a device cannot reach: set mqtt.listen to an address of this machine on the LAN (or 0.0.0.0 with server.public_url naming it)"
			if st.Host == "" {
				st.Host = "<this hub's address>"
			}
		}
		if login := s.LoginOf(sw.ID); login != "" {
			st.User = login
			st.Password = "<the password of mqtt.users." + login + ", or run with --show-password>"
			if showPassword {
				st.Password = s.Users[login].Password
			}
		}
		return st
	}
	u, err := url.Parse(s.Broker)
	if err == nil {
		st.Host, st.Port = u.Hostname(), u.Port()
		if st.Port == "" {
			st.Port = map[string]string{"tcp": "1883", "ssl": "8883", "ws": "80", "wss": "443"}[u.Scheme]
		}
	}
	st.User, st.Password = "<the device's login on your broker>", "<its password>"
	st.Note = "the broker is your own (" + s.Broker + "): give the device a login there that may publish its state and read its commands"
	return st
}

// SetupGuide says, for switch sw's firmware, what to set on the device.
func SetupGuide(sw config.Switch, st Setup) (string, error) {
	opt := func(key string) string {
		if n := config.Lookup(sw.Options, key); n != nil {
			return n.Value
		}
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	user := st.User
	if user == "" {
		user = "<none: the broker takes any client on loopback>"
	}
	switch profile := opt("profile"); profile {
	case "tasmota":
		topic := opt("topic")
		line := fmt.Sprintf("Backlog MqttHost %s; MqttPort %s; MqttUser %s; MqttPassword %s; Topic %s", st.Host, st.Port, st.User, st.Password, topic)
		if full := opt("full_topic"); full != "" {
			line += "; FullTopic " + full
		}
		if st.User == "" {
			line = fmt.Sprintf("Backlog MqttHost %s; MqttPort %s; Topic %s", st.Host, st.Port, topic)
		}
		w("Tasmota (switch %s): in the device's web page, Tools > Console, enter this one line:", sw.ID)
		w("")
		w("  %s", line)
		w("")
		w("The device restarts and connects; check with the console's MQTT lines. The same fields are on")
		w("Configuration > Configure MQTT (Host, Port, User, Password, Topic); MQTT must be on in")
		w("Configuration > Configure Other.")
	case "shelly-gen1":
		id := opt("device_id")
		w("Shelly Gen1 (switch %s, device %s): in the device's web page, Internet & Security >", sw.ID, id)
		w("Advanced - Developer Settings, tick \"Enable action execution via MQTT\" and set:")
		w("")
		w("  Server:   %s:%s", st.Host, st.Port)
		w("  Username: %s", user)
		w("  Password: %s", st.Password)
		w("")
		w("Leave the ID as it is (%s), then Save; the device restarts. Or in one request from this", id)
		w("network (the device's address in place of DEVICE):")
		w("")
		w("  curl 'http://DEVICE/settings?mqtt_enable=true&mqtt_server=%s:%s&mqtt_user=%s&mqtt_pass=%s'",
			st.Host, st.Port, url.QueryEscape(st.User), url.QueryEscape(st.Password))
	case "shelly-rpc":
		prefix := opt("prefix")
		cfg := fmt.Sprintf(`{"enable":true,"server":"%s:%s","user":"%s","pass":"%s","topic_prefix":"%s","rpc_ntf":true}`,
			st.Host, st.Port, st.User, st.Password, prefix)
		w("Shelly Gen2 or later (switch %s): in the device's web page, Settings > MQTT, enable MQTT and set", sw.ID)
		w("")
		w("  Server:              %s:%s", st.Host, st.Port)
		w("  Username / Password: %s / %s", user, st.Password)
		w("  MQTT prefix:         %s", prefix)
		w("  RPC status notifications over MQTT: on")
		w("")
		w("then Save and reboot. Or through the device's RPC (its address in place of DEVICE):")
		w("")
		w("  curl -d '{\"id\":1,\"method\":\"MQTT.SetConfig\",\"params\":{\"config\":%s}}' http://DEVICE/rpc", cfg)
		w("  curl -d '{\"id\":2,\"method\":\"Shelly.Reboot\"}' http://DEVICE/rpc")
	case "zigbee2mqtt":
		w("Zigbee2MQTT (switch %s, device %s): in Zigbee2MQTT's configuration.yaml, then restart it:", sw.ID, opt("friendly_name"))
		w("")
		w("  mqtt:")
		w("    base_topic: %s", cmpOr(opt("base_topic"), "zigbee2mqtt"))
		w("    server: mqtt://%s:%s", st.Host, st.Port)
		if st.User != "" {
			w("    user: %s", st.User)
			w("    password: %s", st.Password)
		}
		w("")
		w("One login serves the bridge and every device behind it.")
	case "esphome":
		w("ESPHome (switch %s): in the node's YAML, then install it on the device again:", sw.ID)
		w("")
		w("  mqtt:")
		w("    broker: %s", st.Host)
		w("    port: %s", st.Port)
		if st.User != "" {
			w("    username: %s", st.User)
			w("    password: %s", st.Password)
		}
		w("    topic_prefix: %s", opt("prefix"))
		w("    discovery: true")
	case "generic":
		w("A generic MQTT device (switch %s): set the device's MQTT client to", sw.ID)
		w("")
		w("  broker:   %s:%s", st.Host, st.Port)
		w("  user:     %s", user)
		w("  password: %s", st.Password)
		w("  commands: subscribe to %s (payloads %s / %s)", opt("command_topic"), cmpOr(opt("payload_on"), "ON"), cmpOr(opt("payload_off"), "OFF"))
		w("  state:    publish on %s", opt("state_topic"))
		if a := opt("availability_topic"); a != "" {
			w("  availability: %s, as its last will too", a)
		}
	default:
		return "", fmt.Errorf("switch %s: profile %q has no setup guide", sw.ID, profile)
	}
	if st.Note != "" {
		w("")
		w("Note: %s.", st.Note)
	}
	return b.String(), nil
}
