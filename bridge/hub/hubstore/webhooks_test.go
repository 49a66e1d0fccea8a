package hubstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

// TestDisableAndEnableWebhook: a disabled webhook gets nothing queued and
// loses what waited; enabled again (an owner's choice) it is delivered
// to, its reason and failures forgotten, and nothing of the time it was
// disabled comes back. Enabling one that is not disabled, or none, is
// refused and changes nothing. On both dialects.
func TestDisableAndEnableWebhook(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := open(t, t.TempDir())
		at := time.UnixMilli(1_800_000_000_000)
		w := &bridge.Webhook{ID: "wh_1", InstallationID: "inst-1", URL: "https://receiver.example/hook", Secret: "whsec_x"}
		other := &bridge.Webhook{ID: "wh_2", InstallationID: "inst-1", URL: "https://receiver.example/other", Secret: "whsec_y"}
		for _, x := range []*bridge.Webhook{w, other} {
			if err := db.AddWebhook(ctx, x, 4); err != nil {
				t.Fatal(err)
			}
		}
		queue := func(id, sw string) {
			t.Helper()
			if err := db.EnqueueWebhookDeliveries(ctx, []bridge.WebhookDelivery{{WebhookID: id, SwitchID: sw, MsgID: "msg_" + sw, Payload: []byte("{}"), QueuedAt: at, NextAt: at}}); err != nil {
				t.Fatal(err)
			}
		}
		read := func(id string) *bridge.Webhook {
			t.Helper()
			got, err := db.Webhook(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		queue(w.ID, "kitchen")
		due, err := db.DueWebhookDeliveries(ctx, at, 10)
		if err != nil || len(due) != 1 {
			t.Fatalf("due %+v, %v; want the one queued", due, err)
		}
		if _, err := db.WebhookFailed(ctx, due[0], at, at.Add(time.Minute), "answered 500"); err != nil {
			t.Fatal(err)
		}

		if err := db.DisableWebhook(ctx, w.ID, "disabled by the hub's owner"); err != nil {
			t.Fatal(err)
		}
		queue(w.ID, "hall")
		if got := read(w.ID); !got.Disabled || got.DisabledReason != "disabled by the hub's owner" || got.Pending != 0 {
			t.Fatalf("disabled: %+v; want disabled with its reason, nothing pending", got)
		}
		if err := db.EnableWebhook(ctx, other.ID); bridge.ErrorCode(err) != bridge.ECONFLICT {
			t.Errorf("enabling a webhook that is not disabled: %v, want ECONFLICT", err)
		}
		if err := db.EnableWebhook(ctx, "wh_none"); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("enabling no webhook: %v, want ENOTFOUND", err)
		}

		if err := db.EnableWebhook(ctx, w.ID); err != nil {
			t.Fatal(err)
		}
		got := read(w.ID)
		if got.Disabled || got.DisabledReason != "" || !got.FailingSince.IsZero() || got.Pending != 0 {
			t.Fatalf("enabled: %+v; want delivering, no failures counted, nothing from the time it was disabled", got)
		}
		if got.LastError != "answered 500" || !got.LastFailureAt.Equal(at) {
			t.Errorf("enabled: last error %q at %v; want the one before, kept for the owner", got.LastError, got.LastFailureAt)
		}
		queue(w.ID, "hall")
		if due, err := db.DueWebhookDeliveries(ctx, at, 10); err != nil || len(due) != 1 || due[0].SwitchID != "hall" {
			t.Errorf("after enabling, due %+v, %v; want the new change", due, err)
		}
		if err := db.EnableWebhook(ctx, w.ID); bridge.ErrorCode(err) != bridge.ECONFLICT {
			t.Errorf("enabling it twice: %v, want ECONFLICT", err)
		}
		if got := read(other.ID); got.Disabled {
			t.Errorf("the other webhook was changed: %+v", got)
		}
	})
}
