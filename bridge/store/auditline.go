package store

import (
	"encoding/json"
	"strconv"

	"github.com/switchbridge/switchbridge/bridge"
)

// appendAuditJSON appends r as encoding/json writes it, byte for byte,
// without reflection: a command to 100 plugs journals 100 records before
// it is answered, and json.Marshal spent about 2 µs and 1.5 KB a record
// on it (BenchmarkJournalAppend). A string that needs any escaping goes
// through encoding/json itself, and a time it refuses is refused, so the
// two cannot differ (TestAuditLineIsJSONs).
func appendAuditJSON(b []byte, r bridge.AuditRecord) ([]byte, error) {
	n := len(b)
	b = append(b, `{"at":"`...)
	b, err := r.At.AppendText(b) // what MarshalJSON quotes, refusing what it refuses
	if err != nil {
		js, err := json.Marshal(r)
		return append(b[:n], js...), err
	}
	b = append(b, `","installation":`...)
	b = appendJSONString(b, r.InstallationID)
	b = append(b, `,"app":`...)
	b = appendJSONString(b, r.ClientID)
	b = append(b, `,"user":`...)
	b = strconv.AppendInt(b, r.UserID, 10)
	b = append(b, `,"switch":`...)
	b = appendJSONString(b, r.SwitchID)
	b = append(b, `,"command":`...)
	b = appendJSONString(b, string(r.Command))
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, r.Outcome)
	b = append(b, `,"latency":`...)
	b = strconv.AppendInt(b, int64(r.Latency), 10)
	b = append(b, `,"request_id":`...)
	b = appendJSONString(b, r.RequestID)
	return append(b, '}'), nil
}

// appendJSONString appends s quoted: as it is when every byte is printable
// ASCII that encoding/json leaves alone (ids, outcomes, commands always
// are), else as encoding/json quotes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			js, _ := json.Marshal(s) // a string always encodes
			return append(b, js...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
