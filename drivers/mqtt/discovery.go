// Discovery: what plugs announce by themselves on the broker (Tasmota's
// tasmota/discovery/<MAC>/config, Shelly's shellies/announce and
// Shelly.GetDeviceInfo, Zigbee2MQTT's bridge/devices, Home Assistant MQTT
// discovery), kept as a bounded list of devices with the switch entry each
// would need, for the owner to adopt. Each firmware's reading of its
// announcements is in its own announce_*.go file.

package mqtt

import (
	"context"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers"
)

// Device is one switchable channel a device announced: a relay of a
// Tasmota or Shelly, an endpoint of a Zigbee device, one Home Assistant
// switch entity.
type Device struct {
	// ID is stable across restarts of the device: taken from its MAC,
	// Zigbee IEEE address, Shelly device id or Home Assistant unique_id,
	// with the relay or endpoint when the device has several.
	ID string `json:"id"`
	// Firmware is the profile that speaks it (tasmota, shelly-gen1,
	// shelly-rpc, zigbee2mqtt, esphome, generic).
	Firmware string `json:"firmware"`
	Model    string `json:"model,omitempty"`
	Name     string `json:"name,omitempty"`
	Version  string `json:"version,omitempty"`
	// Topics are the topics the switch entry would command and read.
	Topics DeviceTopics `json:"topics"`
	// Online is what the device last said of itself: true, false, or nil
	// when it has not said.
	Online *bool `json:"online"`
	// Entry is the switch entry of the config that would use it, a YAML
	// flow mapping as the examples in configs/hub.yaml are written:
	// {id: …, name: …, driver: mqtt, profile: …, …}.
	Entry string `json:"entry"`
	// UsedBy is the configured switch that already uses it, "" when none.
	UsedBy   string    `json:"used_by,omitempty"`
	LastSeen time.Time `json:"last_seen"`
	// ClientID and Login are who announced it on the embedded broker (""
	// on another): adopting it binds that client id to its new login.
	ClientID string `json:"client_id,omitempty"`
	Login    string `json:"login,omitempty"`

	// Where the device announced itself (the config topic, or the bridge's
	// devices topic): an empty retained message there removes it.
	source string
	// fingerprint identifies the plug its entry builds (see plugPrint).
	fingerprint string
	// availability is the topic that says whether it is online, and the
	// payloads.
	availability              string
	availableOn, availableOff string
}

// DeviceTopics are a discovered device's topics.
type DeviceTopics struct {
	Command      string `json:"command,omitempty"`
	State        string `json:"state,omitempty"`
	Availability string `json:"availability,omitempty"`
}

// DiscoveredStore is where the driver keeps the list for the owner's
// commands (switchbridge devices), which run in another process. The
// hub's store satisfies it.
type DiscoveredStore interface {
	// ReplaceDiscoveredDevices replaces the stored list with devs.
	ReplaceDiscoveredDevices(ctx context.Context, devs []bridge.DiscoveredDevice) error
}

// Bounds of discovery: what any client on the broker can make the hub
// hold or do by announcing.
const (
	// maxDiscovered is the devices the list holds; beyond it new ones are
	// refused (logged once until there is room again).
	maxDiscovered = 256
	// maxAnnouncement caps the announcement of one device (Tasmota's
	// config is about 1 KiB; Home Assistant's a few hundred bytes).
	maxAnnouncement = 16 << 10
	// maxBridgeDevices caps Zigbee2MQTT's bridge/devices: about 2-5 KiB
	// per device with its exposes, so room for a few hundred devices.
	maxBridgeDevices = 4 << 20
	// newPerSourceBurst and newPerSourceEvery bound how fast one kind of
	// announcement (a source: Tasmota, Shelly, Zigbee2MQTT, Home
	// Assistant) adds devices: a burst, then one per interval. Updates of
	// devices already listed are not counted.
	newPerSourceBurst = 64
	newPerSourceEvery = time.Second
	// flushEvery is how often, at most, the list is written to the store.
	flushEvery = time.Second
	// maxIDLen bounds a discovered id and a name in an entry.
	maxIDLen = 64
)

// Sources of announcements: the label of the per-source bound and of the
// log lines, a fixed set.
const (
	sourceTasmota = "tasmota"
	sourceShelly  = "shelly"
	sourceZ2M     = "zigbee2mqtt"
	sourceHA      = "homeassistant"
)

// discovery is the list and what listens for it.
type discovery struct {
	log   *slog.Logger
	store DiscoveredStore
	// used maps the fingerprint of every configured switch's plug to its
	// id: a device whose entry builds the same plug is already adopted.
	used map[string]string
	// hubSource is the source of the hub's own RPC requests to Shelly
	// Gen2+ devices (Shelly.GetDeviceInfo); their answers come on
	// hubSource/rpc.
	hubSource string
	// ask publishes a question to a device (never retained); nil while
	// the driver is not connected.
	ask func(message)
	// origin returns who published an announcement, when the broker is
	// the embedded one and kept it; nil otherwise.
	origin func(topic string, payload []byte) (Origin, bool)

	mu      sync.Mutex
	devs    map[string]*Device  // by ID
	avail   map[string][]string // availability topic → ids
	buckets map[string]*bucket
	full    bool // the list was full at the last refusal (logged once)
	limited map[string]bool
	asked   map[string]bool // Gen2+ prefixes asked for their device info
	// askedIDs maps the id of each Shelly.GetDeviceInfo not yet answered
	// to the prefix asked.
	askedIDs map[uint64]string
	nextAsk  uint64
	// newAvail are availability topics listed since the driver last
	// subscribed.
	newAvail []string
	dirty    bool
	flushC   chan struct{}
	stop     chan struct{}
	done     chan struct{}
	// quit is stop as run made it, never reset: what timers started
	// from the message goroutine watch.
	quit chan struct{}
	// gen1Waits are the waits before asking a Gen1 device again
	// (gen1AskAgain).
	gen1Waits []time.Duration
}

// setUsed takes the configured switches, at open and at each reload: a
// device whose entry builds the same plug as one of them is adopted.
// The devices listed are marked again.
func (x *discovery) setUsed(devs []*device) {
	used := make(map[string]string, len(devs))
	for _, dev := range devs {
		used[plugPrint(dev.plug)] = dev.id
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.used = used
	for _, d := range x.devs {
		d.UsedBy = used[d.fingerprint]
	}
	x.changedLocked()
}

func newDiscovery(log *slog.Logger, store DiscoveredStore, hubSource string) *discovery {
	return &discovery{log: log.With("component", "discovery"), store: store, used: map[string]string{}, hubSource: hubSource,
		devs: map[string]*Device{}, avail: map[string][]string{}, buckets: map[string]*bucket{},
		limited: map[string]bool{}, asked: map[string]bool{}, askedIDs: map[uint64]string{}, flushC: make(chan struct{}, 1),
		gen1Waits: gen1AskAgain}
}

// bucket is a token bucket of new devices per source.
type bucket struct {
	tokens float64
	last   time.Time
}

func (b *bucket) take(now time.Time) bool {
	b.tokens = min(float64(newPerSourceBurst), b.tokens+now.Sub(b.last).Seconds()/newPerSourceEvery.Seconds())
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// filters are the topics discovery subscribes to, besides the
// availability topics of the devices it lists.
func (x *discovery) filters() []string {
	return []string{
		"tasmota/discovery/+/config",
		"tasmota/discovery/+/sensors",
		"shellies/announce",
		"shellies/+/online",
		"+/online",
		x.hubSource + "/rpc",
		"+/bridge/devices",
		"homeassistant/switch/+/config",
		"homeassistant/switch/+/+/config",
	}
}

// availabilityTopics lists the availability topics of the listed devices,
// subscribed to again after a reconnect.
func (x *discovery) availabilityTopics() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.avail))
	for t := range x.avail {
		out = append(out, t)
	}
	return out
}

// handle reads a message on a discovery topic; it reports whether the
// topic was one. It never blocks: a question to a device is published
// without waiting for it.
func (x *discovery) handle(topic string, payload []byte) (newAvail []string, ok bool) {
	levels := strings.Split(topic, "/")
	switch {
	case len(levels) == 4 && levels[0] == "tasmota" && levels[1] == "discovery" && levels[3] == "config":
		x.replace(sourceTasmota, topic, payload, len(payload) > maxAnnouncement, func() ([]Device, error) {
			return parseTasmotaDiscovery(levels[2], payload)
		})
	case len(levels) == 4 && levels[0] == "tasmota" && levels[1] == "discovery" && levels[3] == "sensors":
		// The sensors' readings: nothing a switch entry needs, but they
		// mark the device as heard from.
		x.seen("tasmota/discovery/" + levels[2] + "/config")
	case topic == "shellies/announce":
		if len(payload) <= maxAnnouncement {
			x.add(sourceShelly, topic, payload, func() ([]Device, error) { return parseShellyAnnounce(payload) })
		}
	case len(levels) == 3 && levels[0] == "shellies" && levels[2] == "online":
		x.shellyGen1Online(levels[1], payload)
	case len(levels) == 2 && levels[1] == "online":
		x.shellyOnline(levels[0], payload)
	case topic == x.hubSource+"/rpc":
		if len(payload) <= maxAnnouncement {
			x.shellyInfo(payload)
		}
	case len(levels) >= 3 && levels[len(levels)-2] == "bridge" && levels[len(levels)-1] == "devices":
		base := strings.Join(levels[:len(levels)-2], "/")
		x.replace(sourceZ2M, topic, payload, len(payload) > maxBridgeDevices, func() ([]Device, error) {
			return parseZ2MDevices(base, payload)
		})
	case len(levels) >= 4 && levels[0] == "homeassistant" && levels[1] == "switch" && levels[len(levels)-1] == "config":
		x.replace(sourceHA, topic, payload, len(payload) > maxAnnouncement, func() ([]Device, error) {
			return parseHADiscovery(levels[2:len(levels)-1], payload)
		})
	default:
		if !x.isAvailability(topic) {
			return nil, false
		}
		x.availability(topic, payload)
		return nil, true
	}
	return x.takeNewAvailability(), true
}

// replace reads the announcement on topic, which stands for every device
// it lists: the devices it listed before and no longer does are dropped,
// and an empty payload (a retained announcement cleared) drops them all.
func (x *discovery) replace(source, topic string, payload []byte, tooBig bool, parse func() ([]Device, error)) {
	if tooBig {
		x.refuse(source, "announcement too large", topic)
		return
	}
	var devs []Device
	if len(payload) > 0 {
		var err error
		if devs, err = parse(); err != nil {
			x.refuse(source, "malformed announcement: "+err.Error(), topic)
			return
		}
	}
	x.mu.Lock()
	keep := map[string]bool{}
	for _, d := range devs {
		keep[d.ID] = true
	}
	for id, d := range x.devs {
		if d.source == topic && !keep[id] {
			x.dropLocked(id)
		}
	}
	x.mu.Unlock()
	for i := range devs {
		devs[i].source = topic
	}
	x.from(devs, topic, payload)
	x.put(source, devs)
}

// add reads an announcement of devices that has no topic of its own to
// clear it (Shelly's), published as payload on topic.
func (x *discovery) add(source, topic string, payload []byte, parse func() ([]Device, error)) {
	devs, err := parse()
	if err != nil {
		x.refuse(source, "malformed announcement: "+err.Error(), "")
		return
	}
	x.from(devs, topic, payload)
	x.put(source, devs)
}

// from notes on devs who published payload on topic, when the broker
// kept it.
func (x *discovery) from(devs []Device, topic string, payload []byte) {
	if x.origin == nil {
		return
	}
	if o, ok := x.origin(topic, payload); ok {
		for i := range devs {
			devs[i].ClientID, devs[i].Login = o.ClientID, o.Login
		}
	}
}

// put lists devs, new ones within the bounds.
func (x *discovery) put(source string, devs []Device) {
	if len(devs) == 0 {
		return
	}
	now := time.Now()
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.buckets[source]
	if b == nil {
		b = &bucket{tokens: newPerSourceBurst, last: now}
		x.buckets[source] = b
	}
	for _, d := range devs {
		d := d
		if old, ok := x.devs[d.ID]; ok {
			if d.Online == nil {
				d.Online = old.Online
			}
			if d.ClientID == "" {
				d.ClientID, d.Login = old.ClientID, old.Login
			}
			x.unindexLocked(old)
		} else {
			if len(x.devs) >= maxDiscovered && !x.makeRoomLocked(d.Login) {
				if !x.full {
					x.full = true
					x.log.Warn("discovered devices list full: further announcements of new devices are ignored until some are adopted or gone",
						"max", maxDiscovered, "source", source)
				}
				continue
			}
			if !b.take(now) {
				if !x.limited[source] {
					x.limited[source] = true
					x.log.Warn("too many new devices announced at once: some are ignored until the rate drops",
						"source", source, "burst", newPerSourceBurst, "then_per_second", 1/newPerSourceEvery.Seconds())
				}
				continue
			}
			if b.tokens >= newPerSourceBurst-1 {
				// The flood is over (the burst refilled): the next one is
				// logged again.
				x.limited[source] = false
			}
		}
		d.LastSeen = now
		d.UsedBy = x.used[d.fingerprint]
		x.devs[d.ID] = &d
		if d.availability != "" {
			if _, known := x.avail[d.availability]; !known {
				x.newAvail = append(x.newAvail, d.availability)
			}
			x.avail[d.availability] = append(x.avail[d.availability], d.ID)
		}
	}
	x.changedLocked()
}

// makeRoomLocked frees a place in a full list for a device announced by
// login, when another login holds more of the list than login does: the
// oldest device of the login holding most goes (unless adopted). So one
// plug login announcing fake devices on the embedded broker fills at most
// its share, never the others'. Elsewhere (another broker: every device's
// login is "") nothing is freed. It reports whether a place was freed.
func (x *discovery) makeRoomLocked(login string) bool {
	if login == "" {
		return false
	}
	held := map[string]int{}
	for _, d := range x.devs {
		if d.Login != "" && d.UsedBy == "" {
			held[d.Login]++
		}
	}
	most := ""
	for l, n := range held {
		if n > held[most] || (n == held[most] && l < most) {
			most = l
		}
	}
	if most == "" || most == login || held[most] <= held[login]+1 {
		return false
	}
	var oldest *Device
	for _, d := range x.devs {
		if d.Login == most && d.UsedBy == "" && (oldest == nil || d.LastSeen.Before(oldest.LastSeen)) {
			oldest = d
		}
	}
	x.log.Info("discovered devices list full: the oldest device of the login holding most of it makes room",
		"login", bridge.Untrusted(most), "device", bridge.Untrusted(oldest.ID), "for_login", bridge.Untrusted(login))
	x.dropLocked(oldest.ID)
	return true
}

// dropLocked removes a device.
func (x *discovery) dropLocked(id string) {
	if d, ok := x.devs[id]; ok {
		x.unindexLocked(d)
		delete(x.devs, id)
		if len(x.devs) < maxDiscovered {
			x.full = false
		}
		x.changedLocked()
	}
}

func (x *discovery) unindexLocked(d *Device) {
	if d.availability == "" {
		return
	}
	ids := slices.DeleteFunc(x.avail[d.availability], func(s string) bool { return s == d.ID })
	if len(ids) == 0 {
		delete(x.avail, d.availability)
	} else {
		x.avail[d.availability] = ids
	}
}

// seen marks the devices announced on topic as heard from now.
func (x *discovery) seen(topic string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, d := range x.devs {
		if d.source == topic {
			d.LastSeen = time.Now()
			x.changedLocked()
		}
	}
}

func (x *discovery) isAvailability(topic string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.avail[topic]
	return ok
}

// availability applies a message on a listed device's availability topic.
func (x *discovery) availability(topic string, payload []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, id := range x.avail[topic] {
		d := x.devs[id]
		var on bool
		switch parseAvailability(payload, d.availableOn, d.availableOff) {
		case availOnline:
			on = true
		case availOffline:
		default:
			if a := parseZ2MAvailability(payload); a != availUnknown && d.Firmware == "zigbee2mqtt" {
				on = a == availOnline
				break
			}
			continue
		}
		d.Online = &on
		d.LastSeen = time.Now()
		x.changedLocked()
	}
}

// takeNewAvailability returns the availability topics listed since the
// last call, to be subscribed to.
func (x *discovery) takeNewAvailability() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := x.newAvail
	x.newAvail = nil
	return out
}

// refuse logs a refused announcement, at most once per source until one
// of that source is read again.
func (x *discovery) refuse(source, why, topic string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	key := "refused:" + source
	if x.limited[key] {
		return
	}
	x.limited[key] = true
	x.log.Warn("announcement refused (further ones from this source are not logged)", "source", source,
		"reason", bridge.Untrusted(why), "topic", bridge.Untrusted(topic))
}

// Devices returns the list, ordered by id.
func (x *discovery) Devices() []Device {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]Device, 0, len(x.devs))
	for _, d := range x.devs {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b Device) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (x *discovery) changedLocked() {
	x.dirty = true
	select {
	case x.flushC <- struct{}{}:
	default:
	}
}

// run writes the list to the store, at most once per flushEvery, until
// close.
func (x *discovery) run() {
	x.stop, x.done = make(chan struct{}), make(chan struct{})
	x.quit = x.stop
	go func() {
		defer close(x.done)
		for {
			select {
			case <-x.stop:
				x.flush()
				return
			case <-x.flushC:
			}
			x.flush()
			t := time.NewTimer(flushEvery)
			select {
			case <-x.stop:
				t.Stop()
				x.flush()
				return
			case <-t.C:
			}
		}
	}()
}

func (x *discovery) close() {
	if x.stop != nil {
		close(x.stop)
		<-x.done
		x.stop = nil
	}
}

func (x *discovery) flush() {
	if x.store == nil {
		return
	}
	x.mu.Lock()
	if !x.dirty {
		x.mu.Unlock()
		return
	}
	x.dirty = false
	x.mu.Unlock()
	devs := x.Devices()
	rows := make([]bridge.DiscoveredDevice, len(devs))
	for i, d := range devs {
		rows[i] = d.record()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := x.store.ReplaceDiscoveredDevices(ctx, rows); err != nil {
		x.log.Error("writing the discovered devices", "error", err)
	}
}

// record is the device as the store keeps it.
func (d Device) record() bridge.DiscoveredDevice {
	return bridge.DiscoveredDevice{ID: d.ID, Firmware: d.Firmware, Model: d.Model, Name: d.Name, Version: d.Version,
		CommandTopic: d.Topics.Command, StateTopic: d.Topics.State, AvailabilityTopic: d.Topics.Availability,
		Online: d.Online, Entry: d.Entry, UsedBy: d.UsedBy, LastSeen: d.LastSeen, ClientID: d.ClientID, Login: d.Login}
}

// ---- entries

// entryField is one key of a switch entry, in order.
type entryField struct {
	key   string
	value any // string, int, []string or map of strings
}

// makeDevice completes a device from its profile's options: the entry and
// its fingerprint, which buildPlug computes, so an entry that would not
// pass the config check is never listed.
func makeDevice(d Device, profile string, opts []entryField) (Device, error) {
	d.ID = cleanID(d.ID)
	if d.ID == "" {
		return Device{}, errEmptyID
	}
	d.Name = clip(d.Name, maxIDLen)
	d.Firmware = profile
	options := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: 1}
	add := func(k string, v any) {
		var vn yaml.Node
		if err := vn.Encode(v); err != nil {
			return
		}
		vn.Style = yaml.FlowStyle
		if vn.Kind == yaml.ScalarNode {
			vn.Style = 0
		}
		options.Content = append(options.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, &vn)
	}
	add("profile", profile)
	for _, f := range opts {
		add(f.key, f.value)
	}
	p, err := buildPlug(drivers.Spec{ID: d.ID, Options: options, Line: 1})
	if err != nil {
		return Device{}, err
	}
	d.fingerprint = plugPrint(p)
	entry := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle}
	entry.Content = append(entry.Content,
		scalar("id"), scalar(switchID(d)),
		scalar("name"), scalar(cmpOr(d.Name, d.ID)),
		scalar("driver"), scalar("mqtt"))
	entry.Content = append(entry.Content, options.Content...)
	out, err := yaml.Marshal(entry)
	if err != nil {
		return Device{}, err
	}
	d.Entry = strings.TrimSpace(string(out))
	return d, nil
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// plugPrint identifies what a plug reads and commands: two switches with
// the same are the same relay.
func plugPrint(p *plug) string {
	routes := make([]string, 0, len(p.routes))
	for t := range p.routes {
		routes = append(routes, t)
	}
	slices.Sort(routes)
	s := p.profile + "|" + strings.Join(routes, "|")
	if p.command != nil {
		m := p.command(bridge.On)
		s += "|" + m.topic + "|" + string(m.payload)
	}
	return s
}

var idChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// cleanID keeps the characters an id on the command line may hold.
func cleanID(s string) string {
	return clip(strings.Trim(idChars.ReplaceAllString(s, "-"), "-"), maxIDLen)
}

// switchID proposes the switch's id: its name in lower case, or its id.
func switchID(d Device) string {
	s := strings.ToLower(cleanID(d.Name))
	if s == "" || !topicLevel.MatchString(s) {
		s = strings.ToLower(d.ID)
	}
	return s
}

func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8Start(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return strings.ToValidUTF8(s, "")
}

func utf8Start(b byte) bool { return b < 0x80 || b >= 0xC0 }
