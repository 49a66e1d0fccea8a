package mqtttest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ShellyGen1 simulates a classic (Gen1) Shelly relay: commands on
// shellies/<id>/relay/<i>/command (on, off, toggle; lower case), state on
// shellies/<id>/relay/<i> when it changes, availability on
// shellies/<id>/online (true, will false, retained).
type ShellyGen1 struct {
	*sim
	devID  string
	retain bool
}

var _ Plug = (*ShellyGen1)(nil)

// NewShellyGen1 connects a simulated Shelly Gen1 device, e.g. id
// shelly1-328900. retain sets the retain flag of its state messages (the
// device's "retain" setting).
func NewShellyGen1(tb testing.TB, broker, id string, relays int, retain bool) *ShellyGen1 {
	tb.Helper()
	s := &ShellyGen1{sim: newSim(tb, broker, id, relays), devID: id, retain: retain}
	s.willTopic, s.willPayload, s.willQoS = "shellies/"+id+"/online", "false", 0
	s.subs["shellies/"+id+"/relay/+/command"] = 0
	s.subs["shellies/"+id+"/command"] = 0
	s.subs["shellies/command"] = 0
	s.handle = s.onMessage
	s.announce = func() { s.pub("shellies/"+id+"/online", 0, true, "true") }
	s.greet = func() {
		// At every connect, as on shellies/command announce.
		s.pub("shellies/announce", 0, false, ShellyGen1Announce(id, len(s.relays)))
		s.publishAll()
	}
	s.Start()
	return s
}

func (s *ShellyGen1) publishAll() {
	for i := range s.relays {
		s.report(i)
	}
}

func (s *ShellyGen1) report(i int) {
	s.pub(fmt.Sprintf("shellies/%s/relay/%d", s.devID, i), 0, s.retain, onOff(s.relay(i), "on", "off"))
}

func (s *ShellyGen1) onMessage(topic string, payload []byte) {
	p := string(payload)
	switch topic {
	case "shellies/command", "shellies/" + s.devID + "/command":
		switch p {
		case "announce":
			s.pub("shellies/announce", 0, false, ShellyGen1Announce(s.devID, len(s.relays)))
		case "update":
			s.publishAll()
		}
		return
	}
	rest, ok := strings.CutPrefix(topic, "shellies/"+s.devID+"/relay/")
	if !ok {
		return
	}
	is, ok := strings.CutSuffix(rest, "/command")
	i, err := strconv.Atoi(is)
	if !ok || err != nil || i < 0 || i >= len(s.relays) || !s.command() {
		return
	}
	var was, now bool
	switch p {
	case "on":
		was, now = s.setRelay(i, true), true
	case "off":
		was, now = s.setRelay(i, false), false
	case "toggle":
		now = !s.relay(i)
		was = s.setRelay(i, now)
	default:
		return
	}
	if was != now {
		s.report(i)
	}
}

// Set implements Plug: a button press on relay 0.
func (s *ShellyGen1) Set(on bool) {
	s.act.Lock()
	defer s.act.Unlock()
	s.setRelay(0, on)
	s.report(0)
}

// ShellyRPC simulates a Gen2+ Shelly (Plus, Pro) over MQTT RPC: requests on
// <prefix>/rpc, the response on <src>/rpc, NotifyStatus with only the
// changed keys on <prefix>/events/rpc, availability on <prefix>/online. Its
// MQTT control takes on, off and toggle on <prefix>/command/switch:<id>,
// and status_update on <prefix>/command (answered with NotifyFullStatus).
type ShellyRPC struct {
	*sim
	prefix    string
	statusNtf bool
}

var _ Plug = (*ShellyRPC)(nil)

// NewShellyRPC connects a simulated Gen2 Shelly with topic prefix prefix
// (also its device id). statusNtf turns on status/switch:N messages.
func NewShellyRPC(tb testing.TB, broker, prefix string, switches int, statusNtf bool) *ShellyRPC {
	tb.Helper()
	s := &ShellyRPC{sim: newSim(tb, broker, prefix, switches), prefix: prefix, statusNtf: statusNtf}
	s.willTopic, s.willPayload, s.willQoS = prefix+"/online", "false", 1
	s.subs[prefix+"/rpc"] = 1
	s.subs[prefix+"/command/#"] = 1
	s.subs[prefix+"/command"] = 1
	s.handle = s.onMessage
	s.announce = func() { s.pub(prefix+"/online", 1, true, "true") }
	s.Start()
	return s
}

type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Src    string          `json:"src"`
	Method string          `json:"method"`
	Params struct {
		ID *int  `json:"id"`
		On *bool `json:"on"`
	} `json:"params"`
}

func (s *ShellyRPC) status(i int) map[string]any {
	return map[string]any{"id": i, "source": "init", "output": s.relay(i), "apower": 0.0, "voltage": 230.1,
		"current": 0.0, "aenergy": map[string]any{"total": 0.0}, "temperature": map[string]any{"tC": 40.1, "tF": 104.2}}
}

func (s *ShellyRPC) onMessage(topic string, payload []byte) {
	if topic == s.prefix+"/command" {
		if string(payload) == "status_update" && s.command() {
			s.fullStatus()
		}
		return
	}
	if topic != s.prefix+"/rpc" {
		if sw, ok := strings.CutPrefix(topic, s.prefix+"/command/switch:"); ok {
			i, err := strconv.Atoi(sw)
			if err == nil && i >= 0 && i < len(s.relays) && s.command() {
				switch string(payload) {
				case "on":
					s.change(i, true, "MQTT")
				case "off":
					s.change(i, false, "MQTT")
				case "toggle":
					s.change(i, !s.relay(i), "MQTT")
				}
			}
		}
		return
	}
	var req rpcRequest
	if json.Unmarshal(payload, &req) != nil || len(req.ID) == 0 || req.Src == "" {
		return // without id and src there is no one to answer
	}
	reply := map[string]any{"id": req.ID, "src": s.prefix, "dst": req.Src}
	if req.Method == "Shelly.GetDeviceInfo" {
		// A question, not a command: not counted.
		reply["result"] = s.deviceInfo()
		b, _ := json.Marshal(reply)
		s.pub(req.Src+"/rpc", 1, false, string(b))
		return
	}
	if !s.command() {
		return
	}
	i := 0
	if req.Params.ID != nil {
		i = *req.Params.ID
	}
	switch {
	case !strings.HasPrefix(req.Method, "Switch."):
		reply["error"] = map[string]any{"code": 404, "message": "No handler for " + req.Method}
	case i < 0 || i >= len(s.relays):
		reply["error"] = map[string]any{"code": -105, "message": fmt.Sprintf("Argument 'id', value %d not found!", i)}
	case req.Method == "Switch.GetStatus":
		reply["result"] = s.status(i)
	// A device answers once it has switched: the output is set (and its
	// NotifyStatus sent) before the reply, which says what it was before.
	case req.Method == "Switch.Set" && req.Params.On != nil:
		reply["result"] = map[string]any{"was_on": s.relay(i)}
		s.change(i, *req.Params.On, "MQTT")
	case req.Method == "Switch.Toggle":
		reply["result"] = map[string]any{"was_on": s.relay(i)}
		s.change(i, !s.relay(i), "MQTT")
	default:
		reply["error"] = map[string]any{"code": -103, "message": "Invalid argument 'on'!"}
	}
	b, _ := json.Marshal(reply)
	s.pub(req.Src+"/rpc", 1, false, string(b))
}

// change sets switch i and notifies when the output changed.
func (s *ShellyRPC) change(i int, on bool, source string) {
	if s.setRelay(i, on) == on {
		return
	}
	ntf := map[string]any{"src": s.prefix, "dst": s.prefix + "/events", "method": "NotifyStatus",
		"params": map[string]any{"ts": float64(time.Now().UnixMilli()) / 1000,
			"switch:" + strconv.Itoa(i): map[string]any{"id": i, "output": on, "source": source}}}
	b, _ := json.Marshal(ntf)
	s.pub(s.prefix+"/events/rpc", 1, false, string(b))
	if s.statusNtf {
		st, _ := json.Marshal(s.status(i))
		s.pub(s.prefix+"/status/switch:"+strconv.Itoa(i), 1, false, string(st))
	}
}

// fullStatus publishes NotifyFullStatus, every switch's status, as the
// device does for status_update on <prefix>/command.
func (s *ShellyRPC) fullStatus() {
	params := map[string]any{"ts": float64(time.Now().UnixMilli()) / 1000}
	for i := range s.relays {
		params["switch:"+strconv.Itoa(i)] = s.status(i)
	}
	b, _ := json.Marshal(map[string]any{"src": s.prefix, "dst": s.prefix + "/events", "method": "NotifyFullStatus", "params": params})
	s.pub(s.prefix+"/events/rpc", 1, false, string(b))
}

// Set implements Plug: the button of switch 0.
func (s *ShellyRPC) Set(on bool) {
	s.act.Lock()
	defer s.act.Unlock()
	s.change(0, on, "button")
}

// Meter publishes relay i's readings as a Gen1 PM device (Shelly Plug S,
// 1PM) does every update period: relay/<i>/power in W and relay/<i>/energy
// in watt-minutes, a counter that starts again at 0 when the device powers
// up (a reboot is a lower wattMinutes than the last).
func (s *ShellyGen1) Meter(i int, watts float64, wattMinutes int64) {
	base := fmt.Sprintf("shellies/%s/relay/%d", s.devID, i)
	s.pub(base+"/power", 0, s.retain, strconv.FormatFloat(watts, 'f', 2, 64))
	s.pub(base+"/energy", 0, s.retain, strconv.FormatInt(wattMinutes, 10))
}
