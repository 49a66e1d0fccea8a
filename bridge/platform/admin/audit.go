package admin

import (
	"context"

	"github.com/switchbridge/switchbridge/bridge"
)

// AuditLog is the audit log a daemon's own store keeps: one record per
// switch of each command its installation API ran or refused. Each hub
// keeps its own: a platform's store holds only the records of its own
// switches' commands.
type AuditLog interface {
	Audit(ctx context.Context, f bridge.AuditFilter) ([]bridge.AuditRecord, error)
}

// AuditReport is what Audit found.
type AuditReport struct {
	// Records are the records this store holds that the filter selects,
	// newest first.
	Records []bridge.AuditRecord
	// Elsewhere are the platform's hubs, each of which keeps the records
	// of the installations in its locations: none of them is here. Empty
	// on a hub, and on a platform without hubs.
	Elsewhere []*bridge.RegisteredHub
}

// Audit reads the audit log (Service.AuditLog) with f. An installation
// that is in a location of one of the platform's hubs has its records
// there, not here: that is an error naming the hub, rather than an empty
// answer that would read as "it did nothing".
func (s *Service) Audit(ctx context.Context, f bridge.AuditFilter) (*AuditReport, error) {
	if f.Limit < 0 {
		return nil, bridge.Errorf(bridge.EINVALID, "the limit must be 0 (none) or more, not %d", f.Limit)
	}
	hubs, err := s.Store.Hubs(ctx)
	if err != nil {
		return nil, err
	}
	if f.InstallationID != "" {
		if h := hubOfInstallation(ctx, s.Store, hubs, f.InstallationID); h != nil {
			return nil, bridge.Errorf(bridge.EINVALID, "installation %s is in a location of hub %s (%s), which keeps its audit log: run switchbridge audit there",
				f.InstallationID, h.Name, h.BaseURL)
		}
	}
	recs, err := s.AuditLog.Audit(ctx, f)
	if err != nil {
		return nil, err
	}
	return &AuditReport{Records: recs, Elsewhere: hubs}, nil
}

// hubOfInstallation is the hub that serves installation id, nil when none
// does (it is this daemon's own, or unknown here: a hub's store does not
// hold the platform's installations, and a record may outlive its
// installation).
func hubOfInstallation(ctx context.Context, st Store, hubs []*bridge.RegisteredHub, id string) *bridge.RegisteredHub {
	if len(hubs) == 0 {
		return nil
	}
	in, err := st.Installation(ctx, id)
	if err != nil {
		return nil
	}
	for _, h := range hubs {
		for _, l := range h.Locations {
			if l.ID == in.LocationID {
				return h
			}
		}
	}
	return nil
}
