package hub

import (
	"context"
	"fmt"
	"time"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
)

// Reload applies the locations, switches and driver settings (the
// drivers' sections) of a new config while the hub serves: commands in
// flight finish; a driver whose settings and switches did not change
// keeps running as it is (its GPIO lines stay claimed, its broker
// connection up); the others are closed and opened anew; then the
// switchboard switches tables. If the new drivers fail to open, the old
// config's drivers are opened again and the error is returned.
func (h *Hub) Reload(ctx context.Context, cfg *config.Config) error {
	env := h.env
	env.Reload = true
	next, err := drivers.Build(cfg, h.reg, env)
	if err != nil {
		return err
	}
	// Again at each reload: a renewal hook that installs a key with the
	// wrong mode ends with one.
	h.warnExposedSecrets(cfg, next)
	return h.Switchboard.Exclusive(func() error {
		kept := next.KeepUnchanged(h.drivers)
		switches, err := next.OpenReplacing(ctx, h.drivers)
		if err == nil {
			err = h.Switchboard.Replace(cfg.BridgeLocations(), switches)
			if err != nil {
				next.Close()
			}
		}
		if err != nil {
			return h.rollBack(ctx, env, err)
		}
		h.drivers = next
		h.cfg.Locations = cfg.Locations
		h.cfg.Sections = cfg.Sections
		h.logger.Info("reloaded switches and locations", "switches", len(switches), "locations", len(cfg.Locations), "drivers_kept", kept)
		return nil
	})
}

// rollBack reopens the drivers the hub ran before a reload that failed
// with err.
func (h *Hub) rollBack(ctx context.Context, env drivers.Env, err error) error {
	h.drivers.Close() // what OpenReplacing had not closed yet
	// Back to the config that worked, even if the reload was interrupted
	// (a SIGTERM cancels ctx): the hub must not be left on closed devices.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// The running drivers' own config: its sections are the settings they
	// run with, whichever reload brought them.
	prev := h.drivers.Config()
	old, berr := drivers.Build(prev, h.reg, env)
	if berr == nil {
		sws, oerr := old.Open(rctx)
		if oerr == nil {
			rerr := h.Switchboard.Replace(prev.BridgeLocations(), sws)
			if rerr == nil {
				h.drivers = old
				return fmt.Errorf("reload failed, kept the previous switches: %w", err)
			}
			old.Close()
			oerr = rerr
		}
		berr = oerr
	}
	// Neither config opens: no switch is served (commands answer 404
	// naming them) rather than commands reaching closed devices. The
	// drivers stay the previous set, all closed, so the next reload that
	// fails rolls back to the same config again.
	h.Switchboard.Replace(prev.BridgeLocations(), nil)
	return fmt.Errorf("reload failed and the previous switches could not be reopened (%v): %w", berr, err)
}
