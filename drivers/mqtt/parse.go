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
