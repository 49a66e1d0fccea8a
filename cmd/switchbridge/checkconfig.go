package main

// check-config: every problem of a config, with its line, without serving.

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/hub/adopt"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

func checkConfig(c *invocation) error {
	cfg, set, taken, err := checkProblems(c.configPath)
	if err != nil {
		return err
	}
	// Warnings do not fail the check: the config works as it is.
	warnings := append(set.Warnings(), config.ExposedSecrets(append(cfg.SecretFiles(), set.SecretFiles()...))...)
	warnings = append(warnings, taken...)
	warnings = append(warnings, cfg.NetworkWarnings()...)
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
// problem listed at once: the checks devices adopt makes too
// (adopt.CheckFile), then the ports; opts may give its text
// (config.Text), which devices adopt checks before it writes it.
//
// The ports a running daemon of this config's database holds come back
// as warnings (taken), with the rest of what check-config warns of left
// to it.
func checkProblems(path string, opts ...config.Option) (cfg *config.Config, set *drivers.Set, taken []config.Problem, err error) {
	cfg, set, err = adopt.CheckFile(path, builtin.Registry(), opts...)
	if err != nil {
		return nil, nil, nil, err
	}
	// Only a config without other problems: a listener a typo made
	// unusable is reported once, as that typo.
	errs, taken := portsInUse(cfg, set, runningHub(cfg))
	if len(errs) > 0 {
		return nil, nil, nil, (&config.Problems{File: path, List: errs}).Err()
	}
	return cfg, set, taken, nil
}

// portsInUse tries every port the config listens on (server.listen,
// server.metrics_listen, a driver's such as mqtt.listen). A port in use
// means serve would not start, an error at the key's line; unless hub, a
// running daemon, has this config's database open: it holds its own
// ports, checked before a reload (which keeps its listeners), so those
// are only warnings.
func portsInUse(cfg *config.Config, set *drivers.Set, hub runningDaemon) (errs, warnings []config.Problem) {
	listens := []drivers.Listen{
		{Key: "server.listen", Addr: cfg.Server.Listen, Line: cfg.ListenLine},
		{Key: "server.metrics_listen", Addr: cfg.Server.MetricsListen, Line: cfg.MetricsListenLine},
	}
	if set != nil {
		listens = append(listens, set.Listens()...)
	}
	for _, l := range listens {
		if l.Addr == "off" || l.Addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.Addr)
		if err == nil {
			ln.Close()
			continue
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			continue // the host is checked already (CheckListenHost)
		}
		if hub.pid < 0 {
			warnings = append(warnings, config.Problem{Line: l.Line, Msg: fmt.Sprintf(
				"%s %s: the port is in use now, so serve would not start; ignore this when the daemon holding it runs this config", l.Key, l.Addr)})
			continue
		}
		if hub.pid > 0 {
			warnings = append(warnings, config.Problem{Line: l.Line, Msg: fmt.Sprintf(
				"%s %s: the port is in use, by the running switchbridge (pid %d) that has this config's database open: fine for a reload; serve would not start beside it",
				l.Key, l.Addr, hub.pid)})
			continue
		}
		errs = append(errs, config.Problem{Line: l.Line, Msg: fmt.Sprintf(
			"%s %s: the port is in use by another program, so serve would not start: stop that program or choose another port", l.Key, l.Addr)})
	}
	return errs, warnings
}
