package mqtt

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
)

// maxPayload caps what the parsers look at. A switch's state message is a
// few hundred bytes; anything larger is not one (Tasmota's STATE, the
// largest, stays under 1 KiB).
const maxPayload = 64 << 10

// parseWord reads a plain state payload: on or off (or one of alsoOff),
// compared without regard to case or surrounding space. Anything else says
// nothing.
func parseWord(b []byte, on, off string, alsoOff ...string) bridge.Value {
	if len(b) > maxPayload {
		return ""
	}
	s := strings.TrimSpace(string(b))
	switch {
	case s == "":
		return ""
	case strings.EqualFold(s, on):
		return bridge.On
	case strings.EqualFold(s, off):
		return bridge.Off
	}
	for _, o := range alsoOff {
		if strings.EqualFold(s, o) {
			return bridge.Off
		}
	}
	return ""
}

// parseAvailability reads an availability payload (Tasmota's Online/Offline,
// Shelly's true/false, ESPHome's online/offline), without regard to case.
func parseAvailability(b []byte, online, offline string) availability {
	switch parseWord(b, online, offline) {
	case bridge.On:
		return availOnline
	case bridge.Off:
		return availOffline
	}
	return availUnknown
}

// parseTasmotaJSON reads a Tasmota RESULT, SetOption4 stat/POWER or
// tele/STATE object: the first of keys present holds a StateText. A
// {"Command":"Error"} or {"Command":"Unknown"} reply is a rejection.
func parseTasmotaJSON(b []byte, keys []string, texts StateText) report {
	obj, ok := jsonObject(b)
	if !ok {
		return report{}
	}
	var r report
	for _, k := range keys {
		if raw, ok := obj[k]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				r.value = parseWord([]byte(s), texts.On, texts.Off)
			}
			break
		}
	}
	if raw, ok := obj["Command"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil && (s == "Error" || s == "Unknown") {
			r.rejected = "Tasmota answered {\"Command\":\"" + s + "\"} (check the relay index)"
		}
	}
	return r
}

// parseJSONState reads a JSON object and the string, boolean or number at
// key, which may be a dotted path ("state", "relay.0.state"). It is compared
// with on and off without regard to case. Zigbee2MQTT's state is this with
// key "state" or "state_<endpoint>".
func parseJSONState(b []byte, key, on, off string) bridge.Value {
	obj, ok := jsonObject(b)
	if !ok {
		return ""
	}
	path := strings.Split(key, ".")
	var raw json.RawMessage
	for i, k := range path {
		raw, ok = obj[k]
		if !ok {
			return ""
		}
		if i < len(path)-1 {
			if obj, ok = jsonObject(raw); !ok {
				return ""
			}
		}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return ""
	}
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case bool:
		s = strconv.FormatBool(v)
	case float64:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return ""
	}
	return parseWord([]byte(s), on, off)
}

// parseZ2MAvailability reads Zigbee2MQTT's availability and bridge/state:
// {"state":"online"} since 2.0, plain online/offline in 1.x legacy mode.
func parseZ2MAvailability(b []byte) availability {
	if a := parseAvailability(b, "online", "offline"); a != availUnknown {
		return a
	}
	switch parseJSONState(b, "state", "online", "offline") {
	case bridge.On:
		return availOnline
	case bridge.Off:
		return availOffline
	}
	return availUnknown
}

// shellyStatus is the part of a Shelly Switch status the driver reads.
type shellyStatus struct {
	ID     *int  `json:"id"`
	Output *bool `json:"output"`
}

func (s shellyStatus) value() bridge.Value {
	switch {
	case s.Output == nil:
		return ""
	case *s.Output:
		return bridge.On
	}
	return bridge.Off
}

// parseShellyOutput reads a status/switch:N message or a Switch.GetStatus
// result.
func parseShellyOutput(b []byte) bridge.Value {
	if len(b) > maxPayload {
		return ""
	}
	var st shellyStatus
	if json.Unmarshal(b, &st) != nil {
		return ""
	}
	return st.value()
}

// parseShellyNotify reads a NotifyStatus or NotifyFullStatus frame and
// returns switch:id's output when the frame carries it. NotifyStatus holds
// only the keys that changed, so a frame without output says nothing.
func parseShellyNotify(b []byte, id int) bridge.Value {
	if len(b) > maxPayload {
		return ""
	}
	var f struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	if json.Unmarshal(b, &f) != nil || (f.Method != "NotifyStatus" && f.Method != "NotifyFullStatus") {
		return ""
	}
	raw, ok := f.Params["switch:"+strconv.Itoa(id)]
	if !ok {
		return ""
	}
	return parseShellyOutput(raw)
}

// rpcReply is a Shelly RPC response frame as it arrives on <src>/rpc.
type rpcReply struct {
	ID     uint64          `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// parseRPCReply reads a response frame. ok is false for anything that is
// not a response with a numeric id and a result or an error.
func parseRPCReply(b []byte) (r rpcReply, ok bool) {
	if len(b) > maxPayload || json.Unmarshal(b, &r) != nil {
		return rpcReply{}, false
	}
	if r.ID == 0 || (r.Error == nil && len(r.Result) == 0) {
		return rpcReply{}, false
	}
	return r, true
}

// jsonObject decodes b as one JSON object, keeping the values raw.
func jsonObject(b []byte) (map[string]json.RawMessage, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > maxPayload || b[0] != '{' {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return nil, false
	}
	return obj, true
}
