package main

// devices setup: what to set on a configured switch's device.

import (
	"flag"
	"fmt"
	"net"
	"net/url"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers/mqtt"
)

func devicesSetup(fs *flag.FlagSet) func(*invocation) error {
	show := fs.Bool("show-password", false, "print the plug login's password instead of where to find it")
	return func(c *invocation) error {
		cfg, err := loadConfig(c.configPath)
		if err != nil {
			return err
		}
		var sw *config.Switch
		for _, l := range cfg.Locations {
			for i := range l.Switches {
				if l.Switches[i].ID == c.args[0] {
					sw = &l.Switches[i]
				}
			}
		}
		switch {
		case sw == nil:
			return fmt.Errorf("no switch %q in %s", c.args[0], cfg.File)
		case sw.Driver != "mqtt":
			return fmt.Errorf("switch %s has driver %s: only mqtt switches have a device to set up", sw.ID, sw.Driver)
		}
		set, err := mqtt.ReadSettings(cfg)
		if err != nil {
			return err
		}
		guide, err := mqtt.SetupGuide(*sw, set.SetupFor(*sw, publicHost(cfg), *show))
		if err != nil {
			return err
		}
		_, err = fmt.Fprint(c.stdout, guide)
		return err
	}
}

// publicHost is the host of server.public_url, where devices on the LAN
// reach this machine; "" when it is not set.
func publicHost(cfg *config.Config) string {
	if cfg.Server.PublicURL == "" {
		return ""
	}
	u, err := url.Parse(cfg.Server.PublicURL)
	if err != nil {
		return ""
	}
	if h := u.Hostname(); net.ParseIP(h) == nil || !net.ParseIP(h).IsUnspecified() {
		return h
	}
	return ""
}
