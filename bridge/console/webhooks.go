package console

// The webhooks page: every webhook of the hub's installations, how it
// fares (the states switchbridge installation list counts: active,
// failing, suspended, disabled), and Disable or Enable per webhook. The
// state is judged as the webhook service judges it: disabled is stored,
// suspended is no live token of the installation's grant, failing is a
// failure since the last success.

import (
	"context"
	"net/http"
	"net/url"

	"github.com/switchbridge/switchbridge/bridge"
)

// OwnerDisabledReason is the reason a webhook an owner disabled gives, to
// the owner and, through the API's disabled_reason, to its app: who did
// it is in the hub's log, not told to the app.
const OwnerDisabledReason = "disabled by an owner of the hub"

func (c *Console) registerWebhooks(mux *http.ServeMux) {
	c.AddMenu("webhooks", "Webhooks")
	c.Handle(mux, "GET "+Path+"webhooks", c.webhooks)
	c.Handle(mux, "POST "+Path+"webhooks/disable", c.disableWebhook)
	c.Handle(mux, "POST "+Path+"webhooks/enable", c.enableWebhook)
}

// Webhook states, as switchbridge installation list names them.
const (
	stateActive    = "active"
	stateFailing   = "failing"
	stateSuspended = "suspended"
	stateDisabled  = "disabled"
)

// webhookRow is a webhook as the page shows it.
type webhookRow struct {
	ID, Installation, App, ClientID, URL, Host string
	// State is one of the state constants; Detail says why or since
	// when.
	State, Detail string
	Pending       int
	LastError     string
	LastFailure   string
	LastDelivery  string
}

// webhookState is how a webhook fares, as the webhook service judges it
// (disabled first, then suspended when no one holds a live token of its
// grant, then failing), with what the owner is told of it.
func webhookState(w *bridge.Webhook, live bool) (state, detail string) {
	switch {
	case w.Disabled:
		return stateDisabled, w.DisabledReason
	case !live:
		return stateSuspended, bridge.SuspendedReason
	case !w.FailingSince.IsZero():
		return stateFailing, "since " + When(w.FailingSince)
	}
	return stateActive, ""
}

func (c *Console) webhooks(q *Request) {
	rows, err := c.webhookRows(q.Ctx())
	if err != nil {
		c.Failed(q.W, q.R, err)
		return
	}
	c.Render(q, http.StatusOK, templates()["webhooks"], c.View(q, "Webhooks", "webhooks", rows))
}

func (c *Console) webhookRows(ctx context.Context) ([]webhookRow, error) {
	rec := c.opts.Hub.Records
	ws, err := rec.Webhooks(ctx, "")
	if err != nil {
		return nil, err
	}
	names := newNamer(c.opts.Hub)
	live := map[string]bool{}
	var out []webhookRow
	for _, w := range ws {
		l, ok := live[w.InstallationID]
		if !ok {
			if l, err = rec.GrantLive(ctx, w.InstallationID, c.opts.Now()); err != nil {
				return nil, err
			}
			live[w.InstallationID] = l
		}
		row := webhookRow{ID: w.ID, Installation: w.InstallationID, URL: w.URL, Host: hostOf(w.URL), Pending: w.Pending,
			LastError: w.LastError, LastDelivery: When(w.LastSuccessAt)}
		row.State, row.Detail = webhookState(w, l)
		if !w.LastFailureAt.IsZero() {
			row.LastFailure = When(w.LastFailureAt)
		}
		in, err := names.installation(ctx, w.InstallationID)
		if err != nil {
			return nil, err
		}
		if in != nil {
			row.ClientID = in.ClientID
			row.App = names.app(ctx, in.ClientID)
		}
		out = append(out, row)
	}
	return out, nil
}

// hostOf is a URL's host, for a message: its path may carry the
// receiver's own secret.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "its receiver"
}

// findWebhook is the webhook a form names; ENOTFOUND when it is gone.
func (c *Console) findWebhook(ctx context.Context, id string) (*bridge.Webhook, error) {
	ws, err := c.opts.Hub.Records.Webhooks(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if w.ID == id {
			return w, nil
		}
	}
	return nil, bridge.Errorf(bridge.ENOTFOUND, "there is no webhook %s (any more)", id)
}

func (c *Console) disableWebhook(q *Request) {
	id := q.Form.Get("id")
	w, err := c.findWebhook(q.Ctx(), id)
	host := "its receiver"
	if err == nil {
		host = hostOf(w.URL)
		if w.Disabled {
			err = bridge.Errorf(bridge.ECONFLICT, "the webhook to %s is disabled already", host)
		} else {
			err = c.opts.Hub.Records.DisableWebhook(q.Ctx(), id, OwnerDisabledReason)
		}
	}
	c.Done(q, Path+"webhooks", "webhook_disable", id, err,
		"Disabled the webhook to "+host+": nothing more is sent to it, and what waited was dropped.")
}

func (c *Console) enableWebhook(q *Request) {
	id := q.Form.Get("id")
	w, err := c.findWebhook(q.Ctx(), id)
	host := "its receiver"
	if err == nil {
		host = hostOf(w.URL)
		err = c.opts.Hub.Records.EnableWebhook(q.Ctx(), id)
	}
	c.Done(q, Path+"webhooks", "webhook_enable", id, err,
		"Enabled the webhook to "+host+": the switches' changes from now on are sent to it.")
}
