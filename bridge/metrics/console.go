package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// consoleResults are the results an owner's console action is counted by.
var consoleResults = []string{"ok", "refused", "failed", "asked"}

func (m *Metrics) initConsole(f promauto.Factory) {
	m.consoleActions = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "console", Name: "actions_total",
		Help: "What owners did in the console (bridge/platform/console), by action and result: ok, refused (a rule or a check said no), failed (the hub could not), asked (a password was asked for again).",
	}, []string{"action", "result"})
}

// ObserveConsole counts one console action, for console.Options.Observe.
// Actions come from the console's code, a fixed set; a result outside
// consoleResults is counted as failed.
func (m *Metrics) ObserveConsole(action, result string) {
	known := false
	for _, r := range consoleResults {
		known = known || r == result
	}
	if !known {
		result = "failed"
	}
	m.consoleActions.WithLabelValues(action, result).Inc()
}
