package bridge_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// persisted is one call of Persist.
type persisted struct {
	confirmed []string
	records   []bridge.AuditRecord
}

// recordPersist makes h's Persist note each call, failing with fail when
// it is set.
func recordPersist(h *bridge.Switchboard, fail error) *[]persisted {
	var calls []persisted
	bridge.Configure(h, func(o *bridge.SwitchboardOptions) {
		o.Persist = func(_ bridge.Value, at map[string]time.Time, recs []bridge.AuditRecord) error {
			var ids []string
			for id := range at {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			calls = append(calls, persisted{ids, recs})
			return fail
		}
	})
	return &calls
}

// outcomes is "switch:outcome" of each record, sorted.
func outcomes(recs []bridge.AuditRecord) string {
	var out []string
	for _, r := range recs {
		out = append(out, r.SwitchID+":"+r.Outcome)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// TestAuditRecordsEveryCommand: a command with a sender leaves one record
// per switch, whatever became of it, in the one Persist call that stores
// its values: all confirmed, some failed or timed out, nothing confirmed,
// refused for a switch lacking the command, for a change cap, for a
// switch gone, or by the caller (Refused). Each record carries the sender,
// the command and, for a switch that ran, how long it took.
func TestAuditRecordsEveryCommand(t *testing.T) {
	slow := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	h, clock, _ := cappedHub(t, map[string]bridge.Device{
		"a":       &device{},
		"b":       &device{},
		"bad":     &device{do: func(context.Context) error { return errors.New("boom") }},
		"slow":    &device{do: slow},
		"onlyon":  &device{supports: map[bridge.Command]bool{bridge.CommandOn: true}},
		"relay":   &relayLike{limit: bridge.ChangeLimit{Burst: 1, Per: time.Hour}},
		"offline": &device{do: func(context.Context) error { return bridge.ErrUnavailable }},
	}, nil)
	bridge.Configure(h, func(o *bridge.SwitchboardOptions) { o.Timeout = 50 * time.Millisecond })
	calls := recordPersist(h, nil)
	sender := bridge.Sender{Installation: "inst-1", App: "app-1", UserID: 7, RequestID: "req-1"}
	ctx := bridge.WithSender(context.Background(), sender)

	for _, c := range []struct {
		name      string
		ids       []string
		cmd       bridge.Command
		code      string
		confirmed string
		want      string
	}{
		{"all confirmed", []string{"a", "b"}, bridge.CommandOn, "", "a b", "a:ok b:ok"},
		{"some failed", []string{"a", "bad", "slow", "offline"}, bridge.CommandOff, bridge.EDEVICE, "a", "a:ok bad:failed offline:unavailable slow:timeout"},
		{"nothing confirmed", []string{"bad"}, bridge.CommandOn, bridge.EDEVICE, "", "bad:failed"},
		{"unsupported", []string{"a", "onlyon"}, bridge.CommandOff, bridge.ENOTIMPLEMENTED, "", "a:not_sent onlyon:unsupported"},
		{"within the cap", []string{"relay"}, bridge.CommandOn, "", "relay", "relay:ok"},
		{"change cap", []string{"relay", "a"}, bridge.CommandOff, bridge.ETOOMANY, "", "a:not_sent relay:rate_limited"},
		{"switch gone", []string{"a", "gone"}, bridge.CommandOn, bridge.ENOTFOUND, "", "a:not_sent gone:not_sent"},
	} {
		*calls = nil
		before := clock.Now()
		err := h.Command(ctx, c.ids, c.cmd)
		if bridge.ErrorCode(err) != c.code {
			t.Errorf("%s: %v, want code %q", c.name, err, c.code)
		}
		if len(*calls) != 1 {
			t.Errorf("%s: Persist called %d times, want once: the records go with the values, in one write", c.name, len(*calls))
			continue
		}
		got := (*calls)[0]
		if strings.Join(got.confirmed, " ") != c.confirmed || outcomes(got.records) != c.want {
			t.Errorf("%s: Persist got confirmed %v, records %s; want %q and %s", c.name, got.confirmed, outcomes(got.records), c.confirmed, c.want)
		}
		for _, r := range got.records {
			if r.InstallationID != "inst-1" || r.ClientID != "app-1" || r.UserID != 7 || r.RequestID != "req-1" || r.Command != c.cmd || r.At.Before(before) {
				t.Errorf("%s: record %+v: want the sender, command %s and a time of the command", c.name, r, c.cmd)
			}
			refused := r.Outcome == bridge.OutcomeNotSent || r.Outcome == bridge.FailUnsupported || r.Outcome == bridge.FailRateLimited
			if refused && r.Latency != 0 {
				t.Errorf("%s: record %+v: a switch that was not sent the command took no time", c.name, r)
			}
			if r.SwitchID == "slow" && r.Latency < h.Options().Timeout {
				t.Errorf("%s: the timed-out switch took %s, want the whole deadline (%s)", c.name, r.Latency, h.Options().Timeout)
			}
		}
	}

	// Refused by the caller: the switch it names with its reason, the
	// others not sent, no device touched.
	*calls = nil
	refusal := &bridge.Error{Code: bridge.EFORBIDDEN, Failures: []bridge.Failure{{SwitchID: "b", Reason: bridge.FailSeeOnly}}}
	h.Refused(ctx, []string{"a", "b"}, bridge.CommandOff, refusal)
	if len(*calls) != 1 || outcomes((*calls)[0].records) != "a:not_sent b:see_only" || len((*calls)[0].confirmed) != 0 {
		t.Errorf("Refused: Persist calls %+v, want one with a:not_sent b:see_only", *calls)
	}
}

// TestAuditNeedsASender: a command that no installation sent (no Sender)
// leaves no record, and Persist hears only of what confirmed, as before
// the audit log.
func TestAuditNeedsASender(t *testing.T) {
	h := newHub(t, map[string]bridge.Device{"a": &device{}, "bad": &device{do: func(context.Context) error { return errors.New("boom") }}})
	calls := recordPersist(h, nil)
	h.Command(context.Background(), []string{"a", "bad"}, bridge.CommandOn)
	h.Command(context.Background(), []string{"bad"}, bridge.CommandOn)
	h.Refused(context.Background(), []string{"a"}, bridge.CommandOn, errors.New("no"))
	if len(*calls) != 1 || len((*calls)[0].records) != 0 || strings.Join((*calls)[0].confirmed, " ") != "a" {
		t.Errorf("Persist calls %+v, want one, for a's value, without records", *calls)
	}
}

// TestAuditStoreFailure: records that cannot be stored do not change the
// answer of a command that switched nothing; one that switched something
// answers that its state was not stored, as before.
func TestAuditStoreFailure(t *testing.T) {
	h := newHub(t, map[string]bridge.Device{"a": &device{}, "bad": &device{do: func(context.Context) error { return errors.New("boom") }}})
	recordPersist(h, errors.New("disk full"))
	ctx := bridge.WithSender(context.Background(), bridge.Sender{Installation: "inst-1", RequestID: "r"})
	if err := h.Command(ctx, []string{"bad"}, bridge.CommandOn); bridge.ErrorCode(err) != bridge.EDEVICE {
		t.Errorf("nothing confirmed, records not stored: %v, want the device's failure", err)
	}
	if err := h.Command(ctx, []string{"a"}, bridge.CommandOn); bridge.ErrorCode(err) != bridge.EUNAVAILABLE {
		t.Errorf("a confirmed, not stored: %v, want unavailable", err)
	}
}

// TestOutcomeText: every outcome a record can have is put in words, each
// its own; one the words do not know is shown as it is.
func TestOutcomeText(t *testing.T) {
	seen := map[string]string{}
	for _, o := range []string{bridge.OutcomeOK, bridge.OutcomeNotSent, bridge.FailSeeOnly, bridge.FailUnsupported,
		bridge.FailRateLimited, bridge.FailTimeout, bridge.FailUnavailable, bridge.FailError} {
		text := bridge.OutcomeText(o)
		if text == o || text == "" {
			t.Errorf("outcome %q has no words: %q", o, text)
		}
		if other, ok := seen[text]; ok {
			t.Errorf("outcomes %q and %q read alike: %q", o, other, text)
		}
		seen[text] = o
	}
	if got := bridge.OutcomeText("new_reason"); got != "new_reason" {
		t.Errorf("an unknown outcome reads %q", got)
	}
}
