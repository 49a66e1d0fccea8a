package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/switchbridge/switchbridge/bridge"
)

// commandBuckets span a GPIO relay (well under a millisecond) to a plug
// over MQTT that only confirms at the default five-second deadline.
var commandBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func (m *Metrics) initCommands(f promauto.Factory) {
	m.commands = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "switch", Name: "commands_total",
		Help: "Switches' parts in commands (a command to three switches counts three), by switch and outcome (ok, unsupported, rate_limited, timeout, unavailable, failed).",
	}, []string{"switch", "outcome"})
	m.commandDuration = f.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "switch", Name: "command_duration_seconds",
		Help:    "Time a switch took to confirm or fail a command it accepted, by driver and command.",
		Buckets: commandBuckets,
	}, []string{"driver", "command"})
}

// ObserveCommand records one switch's part in a command. It has the shape
// of bridge.CommandObserver, for Hub.Observe.
//
// Unsupported and rate-limited outcomes are counted but not timed: the hub
// refuses them before any device is touched, so their zero durations would
// only drag the latency quantiles down.
func (m *Metrics) ObserveCommand(sw *bridge.Switch, cmd bridge.Command, outcome string, d time.Duration) {
	o := m.commandSeries(sw.ID, sw.Driver, cmd, outcome)
	o.commands.Inc()
	if o.duration != nil {
		o.duration.Observe(d.Seconds())
	}
}

// commandKey is one series of the command metrics: a switch (of the
// config), a driver, a command and an outcome, all from bounded sets.
type commandKey struct {
	sw      string
	driver  string
	cmd     bridge.Command
	outcome string
}

// commandObservers are the counter and duration histogram of one
// commandKey; the outcomes that are not timed have no histogram (looking
// one up would export an empty series).
type commandObservers struct {
	commands prometheus.Counter
	duration prometheus.Observer
}

// commandSeries returns the series of a switch's part in a command, looked
// up in the vectors once and then kept (see httpSeries).
func (m *Metrics) commandSeries(sw, driver string, cmd bridge.Command, outcome string) *commandObservers {
	k := commandKey{sw, driver, cmd, outcome}
	if o, ok := m.commandCache.Load(k); ok {
		return o.(*commandObservers)
	}
	o := &commandObservers{commands: m.commands.WithLabelValues(sw, outcome)}
	if outcome != bridge.FailUnsupported && outcome != bridge.FailRateLimited {
		o.duration = m.commandDuration.WithLabelValues(driver, string(cmd))
	}
	m.commandCache.Store(k, o)
	return o
}

// switchCollector exports each switch's state and availability as const
// metrics built from the drivers' caches at scrape time, so there are no
// gauges to keep in step with state reports or config reloads. Their
// location label is the location's id, which never changes; its name,
// which a config may change, is in switchbridge_location_info, so renaming
// a location keeps its switches' series.
type switchCollector struct {
	src       SwitchSource
	state     *prometheus.Desc
	available *prometheus.Desc
	lastSeen  *prometheus.Desc
	location  *prometheus.Desc
	info      *prometheus.Desc
	power     *prometheus.Desc
	energy    *prometheus.Desc
	voltage   *prometheus.Desc
	current   *prometheus.Desc
}

// profiler is the optional interface of a device that names the firmware
// profile it speaks (the MQTT driver's plugs), for switchbridge_switch_info.
type profiler interface{ Profile() string }

func newSwitchCollector(src SwitchSource) *switchCollector {
	labels := []string{"switch", "location"}
	return &switchCollector{
		src: src,
		state: prometheus.NewDesc(prometheus.BuildFQName(namespace, "switch", "state"),
			"Whether the switch is on (1) or off (0); absent while its value is unknown. location is the location's id.", labels, nil),
		available: prometheus.NewDesc(prometheus.BuildFQName(namespace, "switch", "available"),
			"Whether the switch's device is reachable (1), or unreachable or not heard from since the hub started (0). location is the location's id.", labels, nil),
		lastSeen: prometheus.NewDesc(prometheus.BuildFQName(namespace, "switch", "last_seen_timestamp_seconds"),
			"When the hub last heard from the switch's device, in seconds since the epoch; absent while never. location is the location's id.", labels, nil),
		location: prometheus.NewDesc(prometheus.BuildFQName(namespace, "location", "info"),
			"Each configured location, always 1: its id (location, as on the switch metrics) and its name.", []string{"location", "name"}, nil),
		info: prometheus.NewDesc(prometheus.BuildFQName(namespace, "switch", "info"),
			"Each configured switch, always 1: its name, location id, driver and profile (empty for a driver without profiles), for joins.", []string{"switch", "name", "location", "driver", "profile"}, nil),
		power: prometheus.NewDesc(prometheus.BuildFQName(namespace, "switch", "power_watts"),
			"What the switch's device last measured it drawing, in watts; absent for a device without a meter and while the reading is stale.", []string{"switch"}, nil),
		energy: prometheus.NewDesc(prometheus.BuildFQName(namespace, "switch", "energy_kwh_total"),
			"The hub's running total of the energy the switch's device measured, in kWh: it never decreases, across device resets and hub restarts.", []string{"switch"}, nil),
		voltage: prometheus.NewDesc(prometheus.BuildFQName(namespace, "switch", "voltage_volts"),
			"The voltage the switch's device last measured; absent where not reported and while stale.", []string{"switch"}, nil),
		current: prometheus.NewDesc(prometheus.BuildFQName(namespace, "switch", "current_amperes"),
			"The current the switch's device last measured; absent where not reported and while stale.", []string{"switch"}, nil),
	}
}

func (c *switchCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.available
	ch <- c.lastSeen
	ch <- c.location
	ch <- c.info
	ch <- c.power
	ch <- c.energy
	ch <- c.voltage
	ch <- c.current
}

func (c *switchCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.src.Locations() {
		ch <- constGauge(c.location, 1, strconv.FormatInt(l.ID, 10), l.Name)
	}
	now := time.Now()
	for _, sw := range c.src.Switches() {
		loc := strconv.FormatInt(sw.LocationID, 10)
		st := sw.Device.State()
		profile := ""
		if p, ok := sw.Device.(profiler); ok {
			profile = p.Profile()
		}
		ch <- constGauge(c.info, 1, sw.ID, sw.Name, loc, sw.Driver, profile)
		if r := st.Reading; r != nil {
			// The total holds whatever the device's state: it is counted.
			if r.Has&bridge.HasEnergy != 0 {
				ch <- constMetric(c.energy, prometheus.CounterValue, r.Energy, sw.ID)
			}
			if !st.Stale(now) {
				for _, q := range []struct {
					has bridge.Quantities
					d   *prometheus.Desc
					v   float64
				}{{bridge.HasPower, c.power, r.Power}, {bridge.HasVoltage, c.voltage, r.Voltage}, {bridge.HasCurrent, c.current, r.Current}} {
					if r.Has&q.has != 0 {
						ch <- constGauge(q.d, q.v, sw.ID)
					}
				}
			}
		}
		switch st.Value {
		case bridge.On:
			ch <- constGauge(c.state, 1, sw.ID, loc)
		case bridge.Off:
			ch <- constGauge(c.state, 0, sw.ID, loc)
		}
		ch <- constGauge(c.available, boolValue(st.Available), sw.ID, loc)
		if !st.LastSeen.IsZero() {
			ch <- constGauge(c.lastSeen, float64(st.LastSeen.Unix())+float64(st.LastSeen.Nanosecond())/1e9, sw.ID, loc)
		}
	}
}

// constGauge builds a gauge sample, or an invalid metric that fails the
// scrape's error counter rather than panicking on a bad label value.
func constGauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return constMetric(d, prometheus.GaugeValue, v, labels...)
}

// constMetric is constGauge for any value type.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
