package api

// The installation's webhooks: POST /webhooks registers a URL (after the
// receiver confirmed it), GET lists, DELETE /webhooks/:id removes, POST
// /webhooks/:id/rotate gives a new secret.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// WebhookService is what the webhook paths ask (bridge/hub/webhook implements
// it).
type WebhookService interface {
	Register(ctx context.Context, g *bridge.Grant, url string) (*bridge.Webhook, error)
	List(ctx context.Context, installationID string) ([]*bridge.Webhook, error)
	Delete(ctx context.Context, installationID, id string) error
	Rotate(ctx context.Context, installationID, id string) (string, error)
}

// maxWebhookBody bounds a registration's body: one URL.
const maxWebhookBody = 8 << 10

// Answer is a handler's result with a status other than 200.
type Answer struct {
	Status int
	Body   any
}

// Webhook is a webhook as the API shows it; Secret only when it was just
// made.
type Webhook struct {
	ID             string     `json:"id"`
	URL            string     `json:"url"`
	Secret         string     `json:"secret,omitempty"`
	State          string     `json:"state"` // active, suspended or disabled
	DisabledReason string     `json:"disabled_reason,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	LastSuccessAt  *time.Time `json:"last_success_at"`
	LastFailureAt  *time.Time `json:"last_failure_at"`
	LastError      string     `json:"last_error,omitempty"`
	Pending        int        `json:"pending"`
}

func webhookOf(w *bridge.Webhook) Webhook {
	out := Webhook{ID: w.ID, URL: w.URL, State: "active", DisabledReason: w.DisabledReason, CreatedAt: w.CreatedAt.UTC(),
		LastError: w.LastError, Pending: w.Pending}
	switch {
	case w.Disabled:
		out.State = "disabled"
	case w.Suspended:
		// No one holds a live token of the grant: nothing is sent until
		// the app is authorized again.
		out.State = "suspended"
	}
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	out.LastSuccessAt, out.LastFailureAt = opt(w.LastSuccessAt), opt(w.LastFailureAt)
	return out
}

func webhooks(c *Call) (WebhookService, error) {
	if c.Webhooks == nil {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "this hub sends no webhooks")
	}
	return c.Webhooks, nil
}

func registerWebhook(c *Call) (any, error) {
	svc, err := webhooks(c)
	if err != nil {
		return nil, err
	}
	var req struct {
		URL string `json:"url"`
	}
	dec := json.NewDecoder(bytes.NewReader(c.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() || req.URL == "" {
		return nil, bridge.Errorf(bridge.EINVALID, `the body must be {"url": "<http or https URL>"}`)
	}
	w, err := svc.Register(c.Ctx, c.Grant, req.URL)
	if err != nil {
		return nil, err
	}
	out := webhookOf(w)
	out.Secret = w.Secret
	return Answer{Status: http.StatusCreated, Body: out}, nil
}

func listWebhooks(c *Call) (any, error) {
	svc, err := webhooks(c)
	if err != nil {
		return nil, err
	}
	ws, err := svc.List(c.Ctx, c.Grant.InstallationID)
	if err != nil {
		return nil, err
	}
	out := make([]Webhook, len(ws))
	for i, w := range ws {
		out[i] = webhookOf(w)
	}
	return out, nil
}

func deleteWebhook(c *Call) (any, error) {
	svc, err := webhooks(c)
	if err != nil {
		return nil, err
	}
	return nil, svc.Delete(c.Ctx, c.Grant.InstallationID, c.Params["id"])
}

func rotateWebhook(c *Call) (any, error) {
	svc, err := webhooks(c)
	if err != nil {
		return nil, err
	}
	secret, err := svc.Rotate(c.Ctx, c.Grant.InstallationID, c.Params["id"])
	if err != nil {
		return nil, err
	}
	return map[string]string{"secret": secret}, nil
}
