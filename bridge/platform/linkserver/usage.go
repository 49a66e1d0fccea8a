package linkserver

// The platform's side of usage reports: it records when installations
// were last used at their hub (link.Usage).

import (
	"context"
	"net/http"
	"time"

	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// maxUsageBytes bounds the body of a usage report: link.MaxUsageEntries of
// installation ids and times.
const maxUsageBytes = 1 << 20

// UsageStore records the uses hubs report; bridge/platform/accounts implements it.
type UsageStore interface {
	// MarkUsedAtHub records the uses of installations in the hub's
	// locations and ignores the others; it returns how many it recorded.
	MarkUsedAtHub(ctx context.Context, hubID string, used map[string]time.Time) (int, error)
}

func (p *Platform) handleUsage(w http.ResponseWriter, r *http.Request) {
	h := p.authenticate(w, r)
	if h == nil {
		return
	}
	done, ok := p.admit(w, r, h)
	if !ok {
		return
	}
	defer func() { done(r.Context().Err() == nil) }()
	us, ok := p.store.(UsageStore)
	if !ok {
		wire.WriteError(w, http.StatusNotFound, "this platform does not record usage", nil)
		return
	}
	var u link.Usage
	if err := link.DecodeOne(http.MaxBytesReader(w, r.Body, maxUsageBytes), &u); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "unreadable usage report: "+err.Error(), nil)
		return
	}
	if len(u.Used) > link.MaxUsageEntries {
		wire.WriteError(w, http.StatusBadRequest, "usage report: more than 10000 installations", nil)
		return
	}
	now := p.now()
	used := make(map[string]time.Time, len(u.Used))
	for id, sec := range u.Used {
		if id == "" || len(id) > 64 || sec <= 0 {
			continue
		}
		// A hub's clock may run ahead; a use is never later than now.
		at := time.Unix(sec, 0)
		if at.After(now) {
			at = now
		}
		used[id] = at
	}
	n, err := us.MarkUsedAtHub(r.Context(), h.ID, used)
	if err != nil {
		p.logger.Warn("hub link: recording a hub's usage report", "hub", h.ID, "err", err)
		wire.WriteErrorOf(w, err)
		return
	}
	if n < len(u.Used) {
		p.logger.Debug("hub link: a usage report named installations outside the hub's locations", "hub", h.ID,
			"reported", len(u.Used), "recorded", n)
	}
	w.WriteHeader(http.StatusNoContent)
}
