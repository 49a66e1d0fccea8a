package daemon_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/asynclog"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

var (
	fanoutRequests = flag.Int("fanout.requests", 200, "BenchmarkFanout: timed requests per target and N (rounded up to a multiple of 8)")
	fanoutN        = flag.String("fanout.n", "1,10,100", "BenchmarkFanout: comma-separated plug counts")
	fanoutLog      = flag.Bool("fanout.log", true, "BenchmarkFanout: the hub logs at info to a file through the log buffer, as serve logs to the journal (false: discarded)")
	fanoutNodeRED  = flag.Bool("fanout.nodered", true, "BenchmarkFanout: include Node-RED when node and npm are there (false: leave it out, e.g. while profiling)")
)

// BenchmarkFanout is the fan-out comparison `make bench` prints: one HTTP
// request that switches N Tasmota plugs and answers once each has
// confirmed, timed for four targets in one run. `make bench
// BENCH_REQUESTS=400 BENCH_N=1,100` changes the requests per cell and the
// plug counts (the -fanout.requests and -fanout.n flags). Loopback only;
// not part of `make test`.
//
//   - floor: a bare paho client publishing the N commands (QoS 0, as the
//     hub) and waiting for the N stat/<topic>/RESULT replies through one
//     wildcard subscription, matched by their bytes (mqtttest.Floor); no
//     HTTP at all. Its client is set up as the hub's driver sets up its
//     own: replies handled in paho's router goroutine, the connection
//     read through a buffer (without one, paho makes three read(2) a
//     packet; the hub never did).
//   - bare-HTTP: a minimal net/http handler doing the floor's work for PUT
//     /switches/on|off (mqtttest.StartBareHTTP): no authentication, no
//     storage, no logs. The fair limit for "an HTTP call that switches N
//     plugs".
//   - hub: PUT /switches/on|off through the whole hub (bearer check,
//     installation lookup, fan-out, mqtt driver, durable value journal
//     before the 204, metrics).
//   - Node-RED: the flow a skilled user draws: http in → one function
//     node that sends a message per plug to mqtt out (QoS 0) and tracks the
//     plugs still to confirm → one mqtt in on stat/+/POWER (QoS 0, a plain
//     string) back into it → http response (mqtttest.StartNodeRED), when
//     node and npm are there; npm installs node-red@4 into a temporary
//     directory (or NODE_RED_DIR holds an install).
//
// Method. Each target has a Mosquitto of its own on a free loopback port,
// all with set_tcp_nodelay true, and its own fleet of N simulated plugs
// (mqtttest.Fleet, in this process), so none handles another's traffic
// while it is timed. (Until issue 23 the targets shared one Mosquitto,
// where the wildcard subscriptions of the floor, bare-HTTP and Node-RED
// took every target's replies: during the hub's turn, the other three
// handled its N plugs' replies too.) The HTTP targets are called over one
// kept-alive connection by the same bare HTTP/1.1 client
// (daemontest.DialBare). Targets take turns in blocks of
// mqtttest.BenchBlock requests, the order rotating every round, so all
// run under the same load; -fanout.requests (200) timed requests per
// target after one warm-up block; p50 of single requests. Absolute times
// move with the machine's load, the ratios much less: compare within one
// run.
//
// The trace of a run splits by side: `go test -run '^$' -bench
// '^BenchmarkFanout$' -benchtime 1x -fanout.n=1 -fanout.nodered=false
// -trace t.out ./bridge/daemon`. Each target is started inside a region
// "side <name>" (the goroutines it starts are its own; those they start
// in turn too) and each block of requests runs in a region "block
// <name>", so a reader of the trace (golang.org/x/exp/trace) can follow
// one request through the goroutines of its side.
//
// Measured figures, the machines they came from and the history of the
// cuts made to the hub: BENCHMARKS.md in this folder.
//
// The footprint `make bench` prints next to the fan-out table is
// BenchmarkFootprint's (cmd/switchbridge), measured the same day.
func BenchmarkFanout(b *testing.B) {
	ns, err := parseCounts(*fanoutN)
	if err != nil {
		b.Fatal(err)
	}
	requests := max(*fanoutRequests, 1)
	rounds := (requests + mqtttest.BenchBlock - 1) / mqtttest.BenchBlock

	redJS, why := "", "-fanout.nodered=false"
	if *fanoutNodeRED {
		redJS, why = mqtttest.InstallNodeRED(b, b.TempDir())
	}
	if why != "" {
		fmt.Fprintf(os.Stdout, "Node-RED left out: %s\n", why)
	}
	var rows []fanoutRow
	for _, n := range ns {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			targets := fanoutTargets(b, n, redJS)
			for _, t := range targets {
				t.samples.Block(t.put) // warm-up, not kept
				t.samples = t.samples[:0]
			}
			var ms runtime.MemStats
			for b.Loop() {
				for r := range rounds {
					for k := range targets {
						t := targets[(r+k)%len(targets)]
						runtime.ReadMemStats(&ms)
						before := ms.Mallocs
						trace.WithRegion(context.Background(), "block "+t.name, func() { t.samples.Block(t.put) })
						runtime.ReadMemStats(&ms)
						t.mallocs += ms.Mallocs - before
					}
				}
			}
			row := fanoutRow{n: n, p50: map[string]time.Duration{}, p99: map[string]time.Duration{}}
			for _, t := range targets {
				row.p50[t.name] = t.samples.Percentile(50)
				row.p99[t.name] = t.samples.Percentile(99)
				b.ReportMetric(float64(row.p50[t.name].Microseconds()), t.name+"-p50-µs")
				row.allocs = append(row.allocs, fmt.Sprintf("%s %d", t.name, t.mallocs/uint64(len(t.samples))))
			}
			row.requests = len(targets[0].samples)
			b.ReportMetric(row.ratio("hub", "floor"), "hub/floor")
			b.ReportMetric(row.ratio("hub", "bare-HTTP"), "hub/bare-HTTP")
			if _, ok := row.p50["Node-RED"]; ok {
				b.ReportMetric(row.ratio("hub", "Node-RED"), "hub/Node-RED")
			}
			rows = append(rows, row)
		})
	}
	printFanout(os.Stdout, rows, redJS)
}

// fanoutTarget is one side of BenchmarkFanout.
type fanoutTarget struct {
	name    string
	put     func(bridge.Command)
	samples mqtttest.Samples
	// mallocs counts the allocations in the process (the target's and its
	// plugs', which are the same for every target) during its blocks.
	mallocs uint64
}

// fanoutTargets starts the four targets, each with its own n plugs, and
// returns them in the order of the table; Node-RED only with redJS.
func fanoutTargets(b *testing.B, n int, redJS string) []*fanoutTarget {
	b.Helper()
	put := func(name string, c *daemontest.BareClient) func(bridge.Command) {
		return func(cmd bridge.Command) {
			if status, body := c.Command(b, string(cmd)); status != http.StatusNoContent {
				b.Fatalf("%s: PUT %s = %d %s", name, cmd, status, body)
			}
		}
	}
	// Every goroutine a target starts (its server, its MQTT client's reader
	// and writer, the goroutines of its requests) inherits the target's
	// profiler label, and the plugs' have theirs, so a -cpuprofile of this
	// benchmark splits by side: go tool pprof -tagfocus side=hub. In a
	// -trace, the region "side <name>" marks the goroutines started for it.
	side := func(name string, fn func()) {
		pprof.Do(context.Background(), pprof.Labels("side", name), func(ctx context.Context) { trace.WithRegion(ctx, "side "+name, fn) })
	}
	// Each target has a Mosquitto of its own, all set up alike: a
	// wildcard subscription (the floor's, bare-HTTP's, Node-RED's) on a
	// shared one would take every target's plugs' replies, the hub's
	// during its turn.
	fleet := func(name string) (broker string, topics, ids, switches []string) {
		broker = mqtttest.StartMosquitto(b).URL
		side("plugs", func() { topics, ids, switches = mqtttest.Fleet(b, broker, name, n) })
		return broker, topics, ids, switches
	}
	var targets []*fanoutTarget

	broker, floorTopics, _, _ := fleet("floor")
	side("floor", func() {
		floor := mqtttest.NewFloor(b, broker, floorTopics)
		targets = append(targets, &fanoutTarget{name: "floor", put: func(cmd bridge.Command) {
			floor.Switch(b, strings.ToUpper(string(cmd)), 5*time.Second)
		}})
	})

	broker, bareTopics, _, _ := fleet("bare")
	side("bare-HTTP", func() {
		bare := daemontest.DialBare(b, mqtttest.StartBareHTTP(b, broker, bareTopics), "")
		targets = append(targets, &fanoutTarget{name: "bare-HTTP", put: put("bare-HTTP", bare)})
	})

	broker, _, ids, sws := fleet("hub")
	side("hub", func() {
		var logger *slog.Logger
		if *fanoutLog {
			f, err := os.Create(filepath.Join(b.TempDir(), "hub.log"))
			if err != nil {
				b.Fatal(err)
			}
			// As serve logs: through the log buffer (asynclog).
			w := asynclog.New(f, 0)
			b.Cleanup(func() { w.Close(); f.Close() })
			logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
		h := startE2ELogged(b, logger, "broker: "+broker+"\nclient_id: bench-hub", sws...)
		hub := daemontest.NewBareClient(b, h.grant(b, ids...))
		targets = append(targets, &fanoutTarget{name: "hub", put: put("hub", hub)})
	})

	if redJS != "" {
		broker, nrTopics, _, _ := fleet("nodered")
		nr := daemontest.DialBare(b, mqtttest.StartNodeRED(b, redJS, broker, nrTopics), "")
		targets = append(targets, &fanoutTarget{name: "Node-RED", put: put("Node-RED", nr)})
	}
	return targets
}

// fanoutRow is one N of the table.
type fanoutRow struct {
	n        int
	requests int
	p50, p99 map[string]time.Duration
	allocs   []string // "<target> <allocations per request>"
}

func (r fanoutRow) ratio(a, b string) float64 {
	return float64(r.p50[a]) / float64(r.p50[b])
}

// printFanout writes the table, the machine and whether the targets of
// issue 13 are met.
func printFanout(w *os.File, rows []fanoutRow, redJS string) {
	if len(rows) == 0 {
		return
	}
	nr := redJS != ""
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "\nfan-out, p50 of %d requests per cell; %s/%s, %d CPUs, %s, load %s",
		rows[0].requests, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	if nr {
		fmt.Fprintf(w, ", Node-RED %s, %s", mqtttest.NodeREDVersion(redJS), nodeVersion())
	}
	fmt.Fprintln(w)
	head := "| N | floor p50 / p99 | bare-HTTP p50 / p99 | hub p50 / p99 |"
	sep := "|---|---|---|---|"
	if nr {
		head += " Node-RED p50 / p99 |"
		sep += "---|"
	}
	head += " hub/floor | hub/bare-HTTP |"
	sep += "---|---|"
	if nr {
		head += " hub/Node-RED |"
		sep += "---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, sep)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	both := func(r fanoutRow, name string) string { return ms(r.p50[name]) + " / " + ms(r.p99[name]) }
	metBare, metNR := true, true
	for _, r := range rows {
		line := fmt.Sprintf("| %d | %s | %s | %s |", r.n, both(r, "floor"), both(r, "bare-HTTP"), both(r, "hub"))
		if nr {
			line += " " + both(r, "Node-RED") + " |"
		}
		line += fmt.Sprintf(" %.2f | %.2f |", r.ratio("hub", "floor"), r.ratio("hub", "bare-HTTP"))
		if nr {
			line += fmt.Sprintf(" %.2f |", r.ratio("hub", "Node-RED"))
			metNR = metNR && r.p50["hub"] <= r.p50["Node-RED"]
		}
		metBare = metBare && r.ratio("hub", "bare-HTTP") <= 1.1
		fmt.Fprintln(w, line)
	}
	for _, r := range rows {
		fmt.Fprintf(w, "N=%d allocations per request in this process (target + its plugs): %s\n", r.n, strings.Join(r.allocs, ", "))
	}
	fmt.Fprintf(w, "target hub ≤ 1.1× bare-HTTP at every N: %s\n", yesNo(metBare))
	if nr {
		fmt.Fprintf(w, "target hub ≤ Node-RED at every N: %s\n", yesNo(metNR))
	}
}

func yesNo(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func nodeVersion() string {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return "node ?"
	}
	return "node " + strings.TrimSpace(string(out))
}

// parseCounts reads -fanout.n.
func parseCounts(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1000 {
			return nil, fmt.Errorf("-fanout.n %q: want plug counts from 1 to 1000, comma-separated", s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}
