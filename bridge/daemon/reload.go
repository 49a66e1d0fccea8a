package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
)

// Reload applies the locations, switches and driver settings (the
// drivers' sections) of a new config without stopping the HTTP servers: commands in flight finish;
// a driver whose settings and switches did not change keeps running as it
// is (its GPIO lines stay claimed, its broker connection up); the others
// are closed and opened anew; then the hub switches tables. If the
// new drivers fail to open, the old config's drivers are opened again and
// the error is returned. It reads platform.secret_file again. Sections
// that need a restart (server, data_dir, oauth, log, audit, demo,
// platform.url and platform.hub_id) are left as they were, with a warning when they changed.
func (d *Daemon) Reload(ctx context.Context, cfg *config.Config) error {
	for name, changed := range map[string]bool{
		"server":   cfg.Server != d.Config.Server,
		"data_dir": cfg.DataDir != d.Config.DataDir,
		"oauth":    cfg.OAuth != d.Config.OAuth,
		"log":      cfg.Log != d.Config.Log,
		"audit":    cfg.Audit != d.Config.Audit,
		// platform.secret_file is read again below; url and hub_id need a restart.
		"platform": (cfg.Platform == nil) != (d.Config.Platform == nil) || (cfg.Platform != nil && (cfg.Platform.URL != d.Config.Platform.URL || cfg.Platform.HubID != d.Config.Platform.HubID)),
		"demo":     (cfg.Demo == nil) != (d.Config.Demo == nil) || (cfg.Demo != nil && *cfg.Demo != *d.Config.Demo),
	} {
		if changed {
			d.logger.Warn("reload: this section changed but takes effect only after a restart", "section", name)
		}
	}
	if err := d.reloadSecret(cfg); err != nil {
		d.logger.Error("reload: " + err.Error())
	}
	env := d.env
	env.Reload = true
	next, err := drivers.Build(cfg, d.reg, env)
	if err != nil {
		return err
	}
	// Again at each reload: a renewal hook that installs a key with the
	// wrong mode ends with one.
	d.warnExposedSecrets(cfg, next)
	return d.Switchboard.Exclusive(func() error {
		kept := next.KeepUnchanged(d.drivers)
		switches, err := next.OpenReplacing(ctx, d.drivers)
		if err == nil {
			err = d.Switchboard.Replace(cfg.BridgeLocations(), switches)
			if err != nil {
				next.Close()
			}
		}
		if err != nil {
			d.drivers.Close() // what OpenReplacing had not closed yet
			// Back to the config that worked, even if the reload was
			// interrupted (a SIGTERM cancels ctx): the hub must not be left
			// on closed devices.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			// The running drivers' own config: its sections are the
			// settings they run with, whichever reload brought them.
			prev := d.drivers.Config()
			old, berr := drivers.Build(prev, d.reg, env)
			if berr == nil {
				sws, oerr := old.Open(rctx)
				if oerr == nil {
					rerr := d.Switchboard.Replace(prev.BridgeLocations(), sws)
					if rerr == nil {
						d.drivers = old
						return fmt.Errorf("reload failed, kept the previous switches: %w", err)
					}
					old.Close()
					oerr = rerr
				}
				berr = oerr
			}
			// Neither config opens: no switch is served (commands answer
			// 404 naming them) rather than commands reaching closed devices.
			// d.drivers stays the previous set, all closed, so the next
			// reload that fails rolls back to the same config again.
			d.Switchboard.Replace(prev.BridgeLocations(), nil)
			return fmt.Errorf("reload failed and the previous switches could not be reopened (%v): %w", berr, err)
		}
		d.drivers = next
		d.setSelf() // a driver's listener may have moved
		d.Config.Locations = cfg.Locations
		d.Config.Sections = cfg.Sections
		if d.Link != nil {
			d.Link.InventoryChanged()
		}
		d.logger.Info("reloaded switches and locations", "switches", len(switches), "locations", len(cfg.Locations), "drivers_kept", kept)
		return nil
	})
}

// ReloadCertificates reads server.tls's files again (SIGHUP); new
// connections get the new certificate, established ones keep theirs. When
// the files do not load, the previous certificate stays in service and the
// error says why. Without server.tls it does nothing.
func (d *Daemon) ReloadCertificates() error {
	if d.certs == nil {
		return nil
	}
	return d.certs.Reload()
}
