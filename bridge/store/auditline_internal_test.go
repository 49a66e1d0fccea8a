package store

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// TestAuditLineIsJSONs: the journal's hand-written audit record is
// encoding/json's, byte for byte, for plain ids and for every string or
// time that needs care; a time encoding/json refuses is refused.
func TestAuditLineIsJSONs(t *testing.T) {
	at := time.Date(2026, 11, 28, 21, 4, 5, 123456789, time.UTC)
	base := bridge.AuditRecord{At: at, InstallationID: "inst-0123456789abcdef", ClientID: "client-1", UserID: 7,
		SwitchID: "kitchen_lamp", Command: bridge.CommandOn, Outcome: bridge.OutcomeOK, Latency: 3 * time.Millisecond, RequestID: "req-1"}
	odd := []string{"", "Küche", "a<b>&c", `quote " and \ back`, "tab\there", "line\nbreak", "\x00\x1f\x7f", "\xff\xfe bad utf-8",
		"\u2028\u2029", "emoji 🔌", "</script>"}
	var recs []bridge.AuditRecord
	recs = append(recs, base, bridge.AuditRecord{}) // the zero record too
	for _, s := range odd {
		r := base
		r.InstallationID, r.ClientID, r.SwitchID, r.Command, r.Outcome, r.RequestID = s, s, s, bridge.Command(s), s, s
		recs = append(recs, r)
	}
	for _, when := range []time.Time{at.In(time.FixedZone("CET", 3600)), at.In(time.FixedZone("odd", -(9*3600 + 30*60 + 17))),
		at.Truncate(time.Second), time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)} {
		r := base
		r.At = when
		recs = append(recs, r)
	}
	r := base
	r.UserID, r.Latency = -1, -time.Second
	recs = append(recs, r)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		r := base
		r.At = time.Unix(rng.Int64N(1<<36), rng.Int64N(1e9))
		r.UserID, r.Latency = rng.Int64(), time.Duration(rng.Int64())
		r.SwitchID = randomString(rng)
		r.RequestID = randomString(rng)
		recs = append(recs, r)
	}
	for _, r := range recs {
		want, werr := json.Marshal(r)
		got, gerr := appendAuditJSON([]byte("x"), r)
		if werr != nil || gerr != nil {
			t.Errorf("%+v: errors %v (encoding/json) and %v", r, werr, gerr)
			continue
		}
		if !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Errorf("%+v:\n got %s\nwant %s", r, got[1:], want)
		}
	}
	for _, when := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		at.In(time.FixedZone("too far", 24*3600))} {
		r := base
		r.At = when
		if _, err := appendAuditJSON(nil, r); err == nil {
			t.Errorf("a record at %v encoded; encoding/json refuses it", when)
		}
	}
}

// randomString is up to 12 bytes, half of the time printable ASCII, else
// any bytes at all.
func randomString(rng *rand.Rand) string {
	b := make([]byte, rng.IntN(13))
	for i := range b {
		if rng.IntN(2) == 0 {
			b[i] = byte(0x20 + rng.IntN(0x5f))
		} else {
			b[i] = byte(rng.IntN(256))
		}
	}
	return string(b)
}
