package mqtt

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
)

// plug is what a profile makes of one switch's options: the topics to
// watch, how to read each, and how to command the plug.
type plug struct {
	profile string
	// routes maps each subscribed topic to its parser.
	routes map[string]parser
	// command builds the message that sets the plug to v; nil for a
	// read-only plug and for one whose firmware is a replier.
	command func(v bridge.Value) message
	// query is what asks the plug to report its state (sent at every
	// connect), or nil when the firmware has no way to ask or is a
	// replier.
	query *message
	// repeatsState is true when the firmware reports its state after every
	// command even if nothing changed. When false, a command for the value
	// the plug already reported is confirmed by that report.
	repeatsState bool
	// requests is the plug's firmware when it answers requests (see
	// replier), else nil.
	requests replier
	// acl is what the embedded broker lets the plug's login do.
	acl plugACL
	// announces is set when the firmware says by itself that it is there
	// (an availability topic) without being asked.
	announces bool
	// gateway is the route that speaks for the plug's gateway rather than
	// the plug (Zigbee2MQTT's bridge/state), or "".
	gateway string
}

// plugACL is the embedded broker's view of one plug's topics, in MQTT
// filter syntax, with one extension for commands: a '#' before the last
// levels matches one or more levels (zigbee2mqtt/#/set), since a friendly
// name may hold any number of levels. The topics the hub reads for the plug
// (its routes) are the reports only its login may publish.
type plugACL struct {
	// commands are what the firmware obeys: only the hub publishes there,
	// and nobody retains. They cover the whole firmware family where its
	// topics have a fixed shape (every Tasmota's cmnd/+/#, group topics
	// included), not only this plug.
	commands []string
	// publish is where the plug's login may publish besides its reports
	// (telemetry, announcements), commands excepted.
	publish []string
	// subscribe is what the plug's login may subscribe to.
	subscribe []string
	// clientSubscribe are filters the firmware subscribes to by default
	// that hold the connecting client's id, written %client% (Tasmota's
	// fallback topic cmnd/DVES_1A2B3C_fb/#): allowed with that client's
	// own id only.
	clientSubscribe []string
}

// askable reports whether the firmware can be asked for its state.
func (p *plug) askable() bool { return p.requests != nil || p.query != nil }

// hearable reports whether the hub hears from the plug without
// commanding it: it can be asked, or it announces itself.
func (p *plug) hearable() bool { return p.askable() || p.announces }

// waitsOn names the topics the plug's own messages come on, for an error
// that says what the hub is waiting for.
func (p *plug) waitsOn() string {
	var ts []string
	for t := range p.routes {
		if t != p.gateway {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	const most = 4 // Tasmota's are four; a message stays one line
	if len(ts) > most {
		ts = append(ts[:most], "…")
	}
	return strings.Join(ts, ", ")
}

// commandable reports whether the plug takes commands.
func (p *plug) commandable() bool { return p.requests != nil || p.command != nil }

// message is one publish. Commands are never retained: the driver has no
// way to say otherwise.
type message struct {
	topic   string
	payload []byte
}

// fixedCommands makes a plug's command function that builds the messages
// for on and off once and hands out those: a command's message is only
// read (paho copies the payload onto the connection), and building one
// per command cost an allocation or two (a JSON encoding for
// Zigbee2MQTT) for every command sent.
func fixedCommands(build func(v bridge.Value) message) func(v bridge.Value) message {
	on, off := build(bridge.On), build(bridge.Off)
	return func(v bridge.Value) message {
		switch v {
		case bridge.On:
			return on
		case bridge.Off:
			return off
		}
		return build(v)
	}
}

// parser reads one message on a plug's topic.
type parser func(payload []byte) report

// report is what one message says about a plug; zero fields say nothing.
type report struct {
	value bridge.Value
	// avail is the plug's own availability.
	avail availability
	// bridge is the availability of the gateway in front of the plug
	// (Zigbee2MQTT's bridge/state).
	bridge availability
	// failure is this plug's command rejected by the firmware (an error
	// answer of a replier, matched to the request by id).
	failure string
	// rejected is a rejection that cannot be pinned on one command:
	// Tasmota's {"Command":"Error"} names no relay, and the device's other
	// relays share the topic. It is kept as a hint for a command that then
	// times out.
	rejected string
	// retained is set for the broker's stored copy of a message, sent
	// because the hub subscribed, rather than the plug's word now: after a
	// broker restart with persistence it may predate the outage.
	retained bool
	// meter is what the plug measured, when the message says.
	meter *meterReport
}

// gatewayOnly reports whether the report is only of the gateway in front
// of the plug: a sign of the gateway, not of the plug.
func (r report) gatewayOnly() bool {
	return r.bridge != availUnknown && r.value == "" && r.avail == availUnknown && r.failure == "" && r.rejected == "" && r.meter == nil
}

type availability int8

const (
	availUnknown availability = iota
	availOnline
	availOffline
)

func (a availability) String() string {
	switch a {
	case availOnline:
		return "online"
	case availOffline:
		return "offline"
	}
	return "unknown"
}

// profiles is every firmware the driver speaks, by the name a switch gives
// in its profile: key. A firmware is one file (its options, its plug with
// its broker rules, its parsers) plus its line here; the tests then fail
// until it also has a simulator in mqtttest listed in contract_test.go and
// its rows in this folder's README (the recipe in CONTRIBUTING.md lists
// the steps).
var profiles = []profile{
	{"tasmota", func() firmware { return new(tasmota) }},
	{"shelly-gen1", func() firmware { return new(shellyGen1) }},
	{"shelly-rpc", func() firmware { return new(shellyRPC) }},
	{"zigbee2mqtt", func() firmware { return new(zigbee2MQTT) }},
	{"esphome", func() firmware { return new(esphome) }},
	{"generic", func() firmware { return new(generic) }},
}

// profile is one firmware the driver speaks.
type profile struct {
	name string
	// options returns a fresh value of the firmware's options, a pointer to
	// a struct whose yaml tags are the profile's keys.
	options func() firmware
}

// firmware is one switch's options under its profile. buildPlug decodes
// the switch's keys into it strictly, then asks it for the plug.
type firmware interface {
	// plug checks the options and makes the plug, reporting every problem
	// to c. It does no I/O.
	plug(c *checker) *plug
}

// replier is the optional interface of a firmware that is commanded and
// asked by requests, each answered on a topic of the hub's own (one per
// switch, see replySource) and matched to its request by an id (Shelly
// RPC), instead of by a command and a query that the plug answers with a
// report on its own topics. A plug of such
// firmware has no command or query message: the driver makes a request for
// each, keeps it until its answer arrives, and subscribes to the reply
// topic besides the plug's routes.
type replier interface {
	// replyTopic is where the firmware answers the requests of the client
	// src (replySource: the hub's client id and the switch's id).
	replyTopic(src string) string
	// request is the message that asks the plug to become target, or to
	// tell its state when target is "". id and src identify the request and
	// whom to answer.
	request(id uint64, src string, target bridge.Value) message
	// reply reads a message on the reply topic: the id of the request it
	// answers and what it says. An answer without a failure to a command
	// confirms the command's target.
	reply(payload []byte) (id uint64, r report, ok bool)
}

// checkProfiles reports a mistake in a list of profiles that no config
// could get right: a name twice, or a key a switch can never give its
// profile because the hub or the driver takes it first (an option called
// name would silently be the switch's name). New refuses to make the
// driver while the registered profiles have one; TestProfileKeys finds it
// first.
func checkProfiles(ps []profile) error {
	reserved := append(config.SwitchKeys(), "profile")
	seen := map[string]bool{}
	var errs []error
	for _, p := range ps {
		if seen[p.name] {
			errs = append(errs, fmt.Errorf("mqtt profile %s is registered twice", p.name))
		}
		seen[p.name] = true
		for _, k := range optionKeys(p.options()) {
			if slices.Contains(reserved, k) {
				errs = append(errs, fmt.Errorf("mqtt profile %s: its key %q is a switch's own key (%s are the switch's): give the option another name",
					p.name, k, strings.Join(reserved, ", ")))
			}
		}
	}
	return errors.Join(errs...)
}

// profileNames lists the registered profiles, in their order.
func profileNames() []string {
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.name
	}
	return names
}

// lookupProfile returns the profile called name.
func lookupProfile(name string) (profile, bool) {
	i := slices.IndexFunc(profiles, func(p profile) bool { return p.name == name })
	if i < 0 {
		return profile{}, false
	}
	return profiles[i], true
}

// optionKeys lists the keys of a firmware's options, in field order.
func optionKeys(fw firmware) []string {
	t := reflect.TypeOf(fw).Elem()
	var keys []string
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() {
			if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
				keys = append(keys, name)
			}
		}
	}
	return keys
}

// checker is what a firmware reports the problems of one switch's options
// to, each at the line of the key concerned (the switch's own line for a key
// that is absent), and the checks the firmwares share.
type checker struct {
	spec    drivers.Spec
	profile string
	ps      *config.Problems
}

// at is the node of key's value, or one at the switch's line.
func (c *checker) at(key string) *yaml.Node {
	if n := config.Lookup(c.spec.Options, key); n != nil {
		return n
	}
	return &yaml.Node{Line: c.spec.Line}
}

// bad reports a problem with key.
func (c *checker) bad(key, format string, args ...any) {
	c.ps.Add(c.at(key), "switch %q: %s", c.spec.ID, fmt.Sprintf(format, args...))
}

// topic checks that t, made from key, is a plain topic name, and returns it.
func (c *checker) topic(key, t string) string {
	if err := checkTopic(t); err != nil {
		c.bad(key, "%s %s", key, err)
	}
	return t
}

// level checks that key's value v is present and one topic level, and
// returns it.
func (c *checker) level(key, v string) string {
	if v == "" {
		c.bad(key, "%s is required for profile %s", key, c.profile)
	} else if strings.ContainsAny(v, "+#/") || strings.ContainsRune(v, 0) {
		c.bad(key, "%s %q must be a single topic level (no /, + or #)", key, v)
	}
	return v
}

// index returns key's value p, def when it is absent, and checks that it
// lies between 0 and max.
func (c *checker) index(key string, p *int, def, max int) int {
	if p == nil {
		return def
	}
	if *p < 0 || *p > max {
		c.bad(key, "%s must be between 0 and %d, not %d", key, max, *p)
	}
	return *p
}

// buildPlug checks one switch's options and makes its plug. It does no I/O.
func buildPlug(s drivers.Spec) (*plug, error) {
	ps := &config.Problems{}
	c := &checker{spec: s, ps: ps}
	var name string
	if n := config.Lookup(s.Options, "profile"); n != nil {
		if err := config.DecodeStrict(n, &name); err != nil {
			ps.Merge(err, s.Line)
			return nil, ps.Err()
		}
	}
	prof, ok := lookupProfile(name)
	if !ok {
		known := strings.Join(profileNames(), ", ")
		if name == "" {
			c.bad("profile", "an mqtt switch needs a profile (%s)", known)
		} else {
			c.bad("profile", "unknown profile %q (known: %s)", name, known)
		}
		return nil, ps.Err()
	}
	c.profile = name
	fw := prof.options()
	// The keys of another profile are told apart from keys of none, which
	// the strict decoding reports as unknown.
	allowed := optionKeys(fw)
	own := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: s.Line}
	if s.Options != nil {
		own.Line, own.Column = s.Options.Line, s.Options.Column
		for i := 0; i+1 < len(s.Options.Content); i += 2 {
			k := s.Options.Content[i]
			switch {
			case k.Value == "profile":
			case !slices.Contains(allowed, k.Value) && ofAnyProfile(k.Value):
				ps.Add(k, "switch %q: key %q does not apply to profile %s (its keys: %s)", s.ID, k.Value, name, strings.Join(allowed, ", "))
			default:
				own.Content = append(own.Content, k, s.Options.Content[i+1])
			}
		}
	}
	if err := config.DecodeStrict(own, fw); err != nil {
		ps.Merge(err, s.Line)
		return nil, ps.Err()
	}
	p := fw.plug(c)
	p.profile = name
	if r, ok := fw.(replier); ok {
		p.requests = r
	}
	if p.command != nil {
		for _, v := range []bridge.Value{bridge.On, bridge.Off} {
			if _, watched := p.routes[p.command(v).topic]; watched {
				c.bad("command_topic", "the command topic must differ from the topics the plug reports on")
				break
			}
		}
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// ofAnyProfile reports whether key is an option of some profile.
func ofAnyProfile(key string) bool {
	for _, p := range profiles {
		if slices.Contains(optionKeys(p.options()), key) {
			return true
		}
	}
	return false
}
