package daemon

import (
	"context"

	"github.com/switchbridge/switchbridge/bridge/config"
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
	// SIGHUP's and the console's (after an adoption) may come at once.
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
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
	if err := d.Hub.Reload(ctx, cfg); err != nil {
		return err
	}
	d.setSelf() // a driver's listener may have moved
	if d.Link != nil {
		d.Link.InventoryChanged()
	}
	return nil
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
