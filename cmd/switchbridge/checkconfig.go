package main

// check-config: every problem of a config, with its line, without serving.

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/switchbridge/switchbridge/bridge/certs"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

func checkConfig(c *invocation) error {
	cfg, set, err := checkProblems(c.configPath)
	if err != nil {
		return err
	}
	// Warnings do not fail the check: the config works as it is.
	warnings := append(set.Warnings(), config.ExposedSecrets(append(cfg.SecretFiles(), set.SecretFiles()...))...)
	warnings = append(warnings, portsInUse(cfg)...)
	warnings = append(warnings, cfg.PlainHTTPOnNetwork()...)
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
	fmt.Fprintf(c.stdout, "%s: ok (%d locations, %d switches)\n", c.configPath, len(cfg.Locations), n)
	return nil
}

// checkProblems checks the config at path as check-config does, every
// problem listed at once; opts may give its text (config.Text), which
// devices adopt checks before it writes it.
func checkProblems(path string, opts ...config.Option) (*config.Config, *drivers.Set, error) {
	ps := &config.Problems{}
	cfg, err := config.Load(path, append([]config.Option{config.ForServe(), config.AllProblems(ps)}, opts...)...)
	if err != nil {
		return nil, nil, err
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
		return nil, nil, err
	}
	return cfg, set, nil
}

// portsInUse warns of a server listener whose port is taken now: serve
// would not start. Only a warning, since the daemon that holds it may be
// this config's own, checked before a reload (which keeps its listeners).
func portsInUse(cfg *config.Config) []config.Problem {
	var out []config.Problem
	for _, l := range []struct{ key, addr string }{
		{"server.listen", cfg.Server.Listen},
		{"server.metrics_listen", cfg.Server.MetricsListen},
	} {
		if l.addr == "off" || l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err == nil {
			ln.Close()
			continue
		}
		if errors.Is(err, syscall.EADDRINUSE) {
			out = append(out, config.Problem{Msg: fmt.Sprintf("%s %s: the port is in use now, so serve would not start; ignore this when the daemon holding it runs this config", l.key, l.addr)})
		}
	}
	return out
}
