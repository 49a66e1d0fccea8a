package main

// check-config: every problem of a config, with its line, without serving.

import (
	"fmt"

	"github.com/switchbridge/switchbridge/bridge/certs"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

func (c *cli) checkConfig(args []string) error {
	f := newFlags("check-config")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("check-config takes no arguments; use --config FILE")
	}
	cfg, ps, err := config.LoadAll(*f.config)
	if err != nil {
		return err
	}
	// The drivers' own keys are checked even when the rest has problems, so
	// one run lists everything there is to fix.
	var set *drivers.Set
	if cfg != nil {
		var derr error
		set, derr = drivers.Build(cfg, builtin.Registry(), drivers.Env{})
		ps.Merge(derr, 0)
		if set != nil {
			// The drivers' own listeners, checked as serve checks them.
			ps.Merge(set.CheckListens(cfg.File), 0)
		}
		// The files serve would refuse to start with, checked here with
		// the rights check-config runs with (run it as the service user).
		if t := cfg.Server.TLS; t.CertFile != "" && t.KeyFile != "" {
			if _, err := certs.Load(t.CertFile, t.KeyFile); err != nil {
				ps.List = append(ps.List, config.Problem{Line: cfg.TLSLine, Msg: "server.tls: " + err.Error()})
			}
		}
	}
	if err := ps.Err(); err != nil {
		return err
	}
	// Warnings do not fail the check: the config works as it is.
	warnings := append(set.Warnings(), config.ExposedSecrets(append(cfg.SecretFiles(), set.SecretFiles()...))...)
	for _, w := range warnings {
		if w.Line > 0 {
			fmt.Fprintf(c.stderr, "%s:%d: warning: %s\n", cfg.File, w.Line, w.Msg)
		} else {
			fmt.Fprintf(c.stderr, "%s: warning: %s\n", cfg.File, w.Msg)
		}
	}
	n := 0
	for _, l := range cfg.Locations {
		n += len(l.Switches)
	}
	fmt.Fprintf(c.stdout, "%s: ok (%d locations, %d switches)\n", *f.config, len(cfg.Locations), n)
	return nil
}
