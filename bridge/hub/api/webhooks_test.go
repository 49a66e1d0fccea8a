package api

import (
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
)

// GET …/webhooks names each webhook's state: disabled wins over suspended
// (a disabled webhook stays so when its grant comes back), suspended over
// active.
func TestWebhookState(t *testing.T) {
	for _, c := range []struct {
		w    bridge.Webhook
		want string
	}{
		{bridge.Webhook{}, "active"},
		{bridge.Webhook{Suspended: true}, "suspended"},
		{bridge.Webhook{Disabled: true, DisabledReason: "the receiver answered 410 Gone"}, "disabled"},
		{bridge.Webhook{Disabled: true, DisabledReason: "x", Suspended: true}, "disabled"},
	} {
		if got := webhookOf(&c.w).State; got != c.want {
			t.Errorf("%+v: state %q, want %q", c.w, got, c.want)
		}
	}
}
