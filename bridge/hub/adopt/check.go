package adopt

import (
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/infra/certs"
	"github.com/switchbridge/switchbridge/drivers"
)

// CheckFile checks the config at path as check-config does, every problem
// listed at once, short of the ports (check-config tries them; a running
// hub holds its own): the config's keys and values, the drivers' keys
// (reg's), their listeners, and the server.tls files. opts may give its
// text (config.Text): an adoption checks the file as it would be before
// it writes it.
func CheckFile(path string, reg drivers.Registry, opts ...config.Option) (*config.Config, *drivers.Set, error) {
	ps := &config.Problems{}
	cfg, err := config.Load(path, append([]config.Option{config.ForServe(), config.AllProblems(ps)}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	var set *drivers.Set
	// The drivers' own keys are checked even when the rest has problems, so
	// one run lists everything there is to fix.
	if cfg != nil {
		var derr error
		set, derr = drivers.Build(cfg, reg, drivers.Env{})
		ps.Merge(derr, 0)
		if set != nil {
			// The drivers' own listeners, checked as serve checks them.
			ps.Merge(set.CheckListens(cfg.File), 0)
		}
		// The files serve would refuse to start with, checked here with
		// the rights the caller runs with (check-config: the service
		// user's, when run as it).
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
