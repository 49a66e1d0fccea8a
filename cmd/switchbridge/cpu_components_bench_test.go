package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/hub/api"
	"github.com/switchbridge/switchbridge/bridge/infra/asynclog"
	"github.com/switchbridge/switchbridge/drivers/builtin"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

var (
	componentsCommands = flag.Int("components.commands", 20000, "BenchmarkCPUComponents: commands per side and run")
	componentsVariants = flag.String("components.variants", strings.Join(hubVariantNames(), ","), "BenchmarkCPUComponents: the hub variants to run beside full (comma-separated)")
	componentsBaseline = flag.String("components.baseline", "", "BenchmarkCPUComponents: comma-separated git revisions (e.g. main, HEAD~3) or switchbridge binaries, each run with serve beside the others as the side baseline:<rev>, for a before/after comparison in the same run")
	componentsProfile  = flag.String("components.cpuprofile", "", "BenchmarkCPUComponents: a directory; the bare handler and each hub variant write <side>.pprof there, a CPU profile of the last run's timed commands")
)

// hubVariants are the builds of the hub BenchmarkCPUComponents runs: full
// is the hub as serve runs it; daemon is the same served by
// Daemon.Serve rather than the handler chain built here again (a control
// of that chain); each other leaves out exactly one component, so its
// difference to full is what that component costs a command.
var hubVariants = []struct{ name, without string }{
	{"full", "nothing: the hub as serve runs it"},
	{"daemon", "nothing, served by Daemon.Serve (the daemon's own listener, connection limit and mux)"},
	{"no-log", "the two info lines per command (slog.DiscardHandler: neither formatted nor written)"},
	{"log-unwritten", "writing the log lines (formatted by the text handler into io.Discard, not handed to the log buffer)"},
	{"no-access", "the access check (the token's grant is read once and then served without the access generation, the grant cache or the usage note)"},
	{"no-journal", "the journal append before the 204 (Switchboard.Persist nil)"},
	{"no-audit", "the audit records (Switchboard.Persist given the values alone: neither journaled nor folded into the database)"},
	{"no-metrics", "the metrics (no Metrics.Instrument around the mux, Switchboard.Observe nil)"},
	{"no-ratelimit", "the rate limit (api.RateLimit zero: no count, no X-RateLimit headers)"},
	{"no-feed", "the change feed's part in a command (Switchboard.Feed nil, the API without a feed)"},
}

func hubVariantNames() []string {
	var names []string
	for _, v := range hubVariants[1:] {
		names = append(names, v.name)
	}
	return names
}

// BenchmarkCPUComponents is BenchmarkCPUPerCommand split by component:
// where the hub's CPU per command goes beside the bare handler's. Its
// method, the machine and the tables it gave are in the doc comment of
// BenchmarkFanout (bridge/daemon), with the other benchmarks'; `make
// bench-components` runs it.
//
// Sides, each a process of its own with its own simulated Tasmota plug,
// data directory and installation: the bare handler (on a Mosquitto of
// its own: its wildcard subscription would get every plug's replies),
// the real hub (serve, built as make dist builds it), and the hub from
// this test binary once whole (full) and once without each component
// hubVariants lists (ablation: full's CPU per command less a variant's
// is what the component costs, knock-on effects included);
// -components.baseline adds the binaries of other revisions (before and
// after in one run). Each side runs from an executable file of its own,
// the test binary's sides from copies of it (ownCopy), so that no side
// finds its code in the CPU's caches because another ran it. Every run
// starts all of them afresh, so that a process's own luck (where its
// memory and threads landed) does not carry from run to run. In each
// round every side sends one block of mqtttest.BenchBlock commands, in
// an order drawn anew every round; a side's CPU is read from
// /proc/PID/task/*/schedstat before and after every round, so it counts
// what its commands left for later (the log buffer's write, the values'
// write-behind) too, and the rounds' differences between two sides,
// which shared the machine's moment, give the difference and its spread.
//
// -components.cpuprofile=DIR writes the last run's CPU profiles of the
// bare handler and of each variant (DIR/<side>.pprof) and prints the CPU
// per command split by component in the shares of the profiles
// (components); profiling costs CPU of its own, so take the ablation
// table from a run without it.
func BenchmarkCPUComponents(b *testing.B) {
	skipIfEmulated(b)
	names := []string{"full"}
	for _, v := range strings.Split(*componentsVariants, ",") {
		if v = strings.TrimSpace(v); v == "" || v == "full" {
			continue
		}
		if !slices.ContainsFunc(hubVariants, func(hv struct{ name, without string }) bool { return hv.name == v }) {
			b.Fatalf("-components.variants: no variant %q (have %s)", v, strings.Join(hubVariantNames(), ", "))
		}
		names = append(names, v)
	}
	dir := b.TempDir()
	exe := filepath.Join(dir, "switchbridge")
	goBuild(b, exe, []string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags=-s -w")
	baselines := map[string]string{} // side name: binary
	var baselineNames []string
	for _, rev := range strings.Split(*componentsBaseline, ",") {
		if rev = strings.TrimSpace(rev); rev == "" {
			continue
		}
		name := "baseline:" + rev
		if st, err := os.Stat(rev); err == nil && !st.IsDir() {
			name = "baseline:" + filepath.Base(rev)
			baselines[name] = rev
		} else {
			baselines[name] = buildRevision(b, rev, filepath.Join(dir, fmt.Sprintf("baseline-%d", len(baselines))))
		}
		baselineNames = append(baselineNames, name)
	}
	profiled := func(name string) bool {
		_, baseline := baselines[name]
		return *componentsProfile != "" && name != "serve" && !baseline
	}

	// What each side runs. The plugs, brokers and installations stay for
	// every run; a hub's (its plug, data directory, installation and
	// ports: a slot) is drawn anew for every run, because the same
	// binary measured in two slots differed by up to 10 µs a command
	// in the same run, run after run.
	type slot struct{ cfg, listen, own, endpoint, token string }
	type sideSpec struct {
		name string
		// run gives the side's process in slot sl (none for the bare
		// handler), with a CPU profile to write, and where it serves.
		run func(sl slot, profile string) (cmd *exec.Cmd, addr, endpoint, token string)
	}
	var specs []sideSpec
	bareBroker := mqtttest.StartMosquitto(b)
	bareTopics, _, _ := mqtttest.Fleet(b, bareBroker.URL, "bare", 1)
	bareAddr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(b))
	bareExe := ownCopy(b, os.Args[0], filepath.Join(dir, "bare-HTTP"))
	specs = append(specs, sideSpec{name: "bare-HTTP", run: func(_ slot, profile string) (*exec.Cmd, string, string, string) {
		c := exec.Command(bareExe)
		c.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%s|%s", bareHTTPEnv, bareBroker.URL, bareTopics[0], bareAddr, profile))
		return c, bareAddr, "http://" + bareAddr, ""
	}})
	variantExes := map[string]string{} // side name: its copy of this test binary
	variant := func(name string, sl slot, profile, addr string) *exec.Cmd {
		c := exec.Command(variantExes[name])
		c.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%s|%s", hubVariantEnv, sl.cfg, name, addr, profile))
		return c
	}
	for _, name := range append(baselineNames, append([]string{"serve"}, names...)...) {
		spec := sideSpec{name: name}
		if _, baseline := baselines[name]; !baseline && name != "serve" {
			variantExes[name] = ownCopy(b, os.Args[0], filepath.Join(dir, "variant-"+name))
		}
		switch bin, baseline := baselines[name]; {
		case name == "serve" || baseline:
			if !baseline {
				bin = exe
			}
			spec.run = func(sl slot, _ string) (*exec.Cmd, string, string, string) {
				return exec.Command(bin, "serve", "--config", sl.cfg), sl.listen, sl.endpoint, sl.token
			}
		case name == "daemon":
			spec.run = func(sl slot, profile string) (*exec.Cmd, string, string, string) {
				return variant(name, sl, profile, sl.listen), sl.listen, sl.endpoint, sl.token
			}
		default:
			// A variant serves the API on a listener of its own (the
			// config's stays bound, unused), where it can leave parts
			// of the handler out.
			spec.run = func(sl slot, profile string) (*exec.Cmd, string, string, string) {
				return variant(name, sl, profile, sl.own), sl.own, strings.Replace(sl.endpoint, sl.listen, sl.own, 1), sl.token
			}
		}
		specs = append(specs, spec)
	}
	broker := mqtttest.StartMosquitto(b)
	// The sides of this code draw their slots from one pool, anew every
	// run; a baseline's database must be made by its own binary (each
	// refuses a schema newer than its own), so a baseline keeps slots its
	// binary prepared, one per run, drawn from in turn.
	var slots []slot
	own := map[string][]slot{} // a baseline's slots
	made := 0
	newSlot := func(exe string) slot {
		id := fmt.Sprintf("hub%d", made)
		made++
		_, _, sws := mqtttest.Fleet(b, broker.URL, id, 1)
		sl := slot{listen: fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(b)), own: fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(b))}
		sl.cfg, sl.endpoint, sl.token = benchInstallationBy(b, exe, filepath.Join(dir, id), broker.URL, sws[0], sl.listen)
		return sl
	}
	for _, spec := range specs[1:] {
		if exe, baseline := baselines[spec.name]; baseline {
			for range 2 {
				own[spec.name] = append(own[spec.name], newSlot(exe))
			}
			continue
		}
		slots = append(slots, newSlot(""))
	}

	type side struct {
		name, addr, endpoint, token string
		proc                        *exec.Cmd
		exited                      chan struct{}
		client                      *daemontest.BareClient
		sysmon                      int // the thread id of the runtime's monitor thread
		// idle is the process's CPU per second while no command runs.
		idle time.Duration
	}
	// start runs every side afresh for a run, warmed up.
	start := func(run int) []*side {
		sides := make([]*side, len(specs))
		draw := rand.Perm(len(slots))
		next := 0
		// In an order drawn anew too: nothing about a side stays the same
		// from run to run but what it runs.
		for _, i := range rand.Perm(len(specs)) {
			spec := specs[i]
			profile := ""
			if profiled(spec.name) {
				profile = filepath.Join(*componentsProfile, spec.name+".pprof")
			}
			var sl slot
			if bs, baseline := own[spec.name]; baseline {
				sl = bs[run%len(bs)]
			} else if i > 0 {
				sl = slots[draw[next]]
				next++
			}
			cmd, addr, endpoint, token := spec.run(sl, profile)
			logFile, err := os.Create(filepath.Join(dir, fmt.Sprintf("run%d-side%d.log", run, i))) // as to the journal: written, not discarded
			if err != nil {
				b.Fatal(err)
			}
			cmd.Stderr = logFile
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			exited := make(chan struct{})
			go func() {
				cmd.Wait()
				logFile.Close()
				close(exited)
			}()
			b.Cleanup(func() { cmd.Process.Kill(); <-exited })
			sides[i] = &side{name: spec.name, addr: addr, endpoint: endpoint, token: token, proc: cmd, exited: exited}
		}
		for _, s := range sides {
			waitListening(b, s.addr)
			s.client = daemontest.DialBare(b, s.endpoint, s.token)
			s.sysmon = sysmonThread(b, s.proc.Process.Pid)
		}
		for _, k := range rand.Perm(len(sides)) { // warm-up: connections, caches, the plug's state
			s := sides[k]
			for range 4 {
				for i := range mqtttest.BenchBlock {
					benchPut(b, s.name, s.client, mqtttest.BenchCommand(i))
				}
			}
		}
		// Each process's CPU while idle, per second: what a round's figure
		// holds besides the commands' work (nothing, as measured: the hub
		// has no timers while idle).
		time.Sleep(time.Second) // the warm-up's trailing work
		idleFrom := make([]time.Duration, len(sides))
		for i, s := range sides {
			idleFrom[i] = processCPU(b, s.proc.Process.Pid)
		}
		time.Sleep(time.Second)
		for i, s := range sides {
			s.idle = processCPU(b, s.proc.Process.Pid) - idleFrom[i]
			if profiled(s.name) {
				s.proc.Process.Signal(syscall.SIGUSR1) // start profiling
			}
		}
		return sides
	}
	// stop ends a run's sides; a profiled one writes its profile first.
	stop := func(sides []*side) {
		for _, s := range sides {
			if profiled(s.name) {
				s.proc.Process.Signal(syscall.SIGTERM)
			} else {
				s.proc.Process.Kill()
			}
		}
		for _, s := range sides {
			<-s.exited
		}
	}

	type perRound struct{ whole, slices, sysmon []float64 } // per command, one value per round
	var runs []map[string]*perRound
	idle := map[string][]time.Duration{}
	type sched struct {
		cpu, sysmon time.Duration
		slices      int64
	}
	µs := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 / mqtttest.BenchBlock }
	for b.Loop() {
		sides := start(len(runs))
		cpus := func() []sched {
			t := make([]sched, len(sides))
			for i, s := range sides {
				t[i].cpu, t[i].slices = processSched(b, s.proc.Process.Pid)
				t[i].sysmon = threadCPU(b, s.proc.Process.Pid, s.sysmon)
			}
			return t
		}
		res := map[string]*perRound{}
		for _, s := range sides {
			res[s.name] = &perRound{}
			idle[s.name] = append(idle[s.name], s.idle)
		}
		from := cpus()
		for r := 0; r*mqtttest.BenchBlock < *componentsCommands; r++ {
			for _, k := range rand.Perm(len(sides)) {
				for i := range mqtttest.BenchBlock {
					benchPut(b, sides[k].name, sides[k].client, mqtttest.BenchCommand(i))
				}
			}
			if (r+1)*mqtttest.BenchBlock >= *componentsCommands {
				// The last commands' trailing work (log writes, the
				// database's write-behind) belongs to the last round.
				time.Sleep(700 * time.Millisecond)
			}
			to := cpus()
			for i, s := range sides {
				pr := res[s.name]
				pr.whole = append(pr.whole, µs(to[i].cpu-from[i].cpu))
				pr.slices = append(pr.slices, float64(to[i].slices-from[i].slices)/mqtttest.BenchBlock)
				pr.sysmon = append(pr.sysmon, µs(to[i].sysmon-from[i].sysmon))
			}
			from = to
		}
		stop(sides)
		runs = append(runs, res)
	}

	// The table: every side's CPU per command in each run, [of which
	// sysmon's], and threads put on a CPU per command; a variant compared
	// with full, a baseline with serve (what that revision's binary spent
	// beyond today's), with the 95 % interval of the difference.
	fmt.Printf("\nCPU per command, N = 1, %d commands per side and run, µs [of which sysmon] and threads put on a CPU per command; the difference to full (serve for a baseline) ± 95 %% interval\n", *componentsCommands)
	fmt.Printf("| side | without | idle µs/s |")
	for i := range runs {
		fmt.Printf(" run %d | difference |", i+1)
	}
	fmt.Println()
	for _, spec := range specs {
		without := ""
		for _, v := range hubVariants {
			if v.name == spec.name {
				without = v.without
			}
		}
		ref := "full"
		switch _, baseline := baselines[spec.name]; {
		case spec.name == "serve":
			without = "nothing: the make dist binary running serve"
		case baseline:
			without, ref = "nothing: the make dist binary of "+strings.TrimPrefix(spec.name, "baseline:")+" running serve", "serve"
		case spec.name == "bare-HTTP":
			without = "the bare net/http handler (mqtttest.BareHTTPServer)"
		}
		var idles []string
		for _, d := range idle[spec.name] {
			idles = append(idles, fmt.Sprintf("%.0f", float64(d.Nanoseconds())/1000))
		}
		fmt.Printf("| %s | %s | %s |", spec.name, without, strings.Join(idles, ", "))
		for _, res := range runs {
			c := res[spec.name]
			d, ci := pairedDiff(res[ref].whole, c.whole)
			fmt.Printf(" %.1f [%.1f] %.1f | %s %+.1f ± %.1f |", mean(c.whole), mean(c.sysmon), mean(c.slices), ref, d, ci)
		}
		fmt.Println()
	}
	if *componentsProfile != "" {
		perCmd, sysmon := map[string]float64{}, map[string]float64{}
		var profiledNames []string
		for _, spec := range specs {
			if profiled(spec.name) {
				profiledNames = append(profiledNames, spec.name)
				perCmd[spec.name] = mean(runs[len(runs)-1][spec.name].whole)
				sysmon[spec.name] = mean(runs[len(runs)-1][spec.name].sysmon)
			}
		}
		printProfileTable(b, *componentsProfile, profiledNames, perCmd, sysmon)
	}
	last := runs[len(runs)-1]
	b.ReportMetric(mean(last["full"].whole), "full-cpu-µs/cmd")
	b.ReportMetric(mean(last["serve"].whole), "serve-cpu-µs/cmd")
	b.ReportMetric(mean(last["bare-HTTP"].whole), "bare-cpu-µs/cmd")
}

// ownCopy copies the executable exe to path, for one side of a CPU
// benchmark alone, and returns path. Processes started from
// the same file share its pages in the page cache, and so its code and
// read-only data in the CPU's caches: the sides run by turns on two
// cores, and a side started from the test binary, as every variant and
// the bare handler once were, found much of its code still cached by the
// side before it, while serve, from a binary of its own, did not. That
// was serve's whole extra cost over full (7–49 µs a command; see the doc
// comment of BenchmarkFanout, bridge/daemon). A copy is a file of its own
// (a link would share the pages), so every side runs code no other side
// touches, as a hub does.
func ownCopy(b *testing.B, exe, path string) string {
	b.Helper()
	src, err := os.Open(exe)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		b.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// benchPut sends one command and fails the benchmark unless it is
// answered 204.
func benchPut(b *testing.B, side string, c *daemontest.BareClient, cmd bridge.Command) {
	if status, body := c.Command(b, string(cmd)); status != http.StatusNoContent {
		b.Fatalf("%s: PUT %s = %d %s", side, cmd, status, body)
	}
}

// components are the parts of a process's CPU BenchmarkCPUComponents
// names in a profile, by the functions on a sample's stack. The
// innermost function that names a component decides, so the access
// check's database read is the access check's, not the handler's; only
// when no function names one do the generic kinds (the HTTP server's and
// the MQTT client's own work, the scheduler, allocation) count.
var components = []struct {
	name    string
	generic bool
	funcs   *regexp.Regexp
}{
	{"log lines (format, log buffer, write)", false, regexp.MustCompile(`^log/slog\.|/bridge/infra/asynclog\.|/bridge/hub/api\.(logLine|logCommand|\(\*Call\)\.answered|command\.func)`)},
	{"access check (token, grant cache, access generation, usage)", false, regexp.MustCompile(`/bridge/platform/oauth\.|/bridge/wire/bearer\.|/bridge/store\.\(\*DB\)\.(AccessGeneration|TokenGrant)|/bridge/store\.\(\*accessCache\)|/bridge/store\.\(\*UsageWriter\)`)},
	{"journal append before the 204", false, regexp.MustCompile(`/bridge/store\.\(\*ValueWriter\)\.Persist|/bridge/store\.\(\*Journal\)\.Append`)},
	{"values' write-behind (a report noted; the database every 500 ms)", false, regexp.MustCompile(`/bridge/store\.`)},
	{"HTTP server I/O (request read, answer write)", false, regexp.MustCompile(`^net/http\.\(\*response\)\.(Flush|FlushError|finishRequest|WriteHeader|write)|^net/http\.\(\*chunkWriter\)|^net/http\.\(\*conn\)\.(readRequest|finalFlush)|^net/http\.readRequest|^net/http\.\(\*connReader\)`)},
	{"metrics", false, regexp.MustCompile(`prometheus|/bridge/metrics\.\(\*Metrics\)\.(Observe|API|Conn)|/bridge/metrics\.(routeOf|methodOf)|/bridge/metrics\.\(\*statusWriter\)\.(WriteHeader|statusCode)|/drivers/mqtt\.\(\*metrics\)`)},
	{"rate limit", false, regexp.MustCompile(`/bridge/hub/api\.\(\*Handler\)\.limitRate|/bridge/hub/api\.\(\*rateLimiter\)|/bridge/hub/api\.seconds`)},
	{"change feed, event streams, webhooks", false, regexp.MustCompile(`/bridge\.\(\*Feed\)|/bridge\.\(\*Subscription\)|/bridge/hub/webhook\.|/bridge/hub/api\.\(\*Handler\)\.streamsCaughtUp|/bridge/hub/api\.\(\*streamer\)|/bridge/daemon\.Open\.func`)},
	{"routing (mux, app path table)", false, regexp.MustCompile(`/bridge/hub/api\.\(\*Router\)|/bridge/hub/api\.\(\*route\)|/bridge/hub/api\.appPath|^net/http\.\(\*ServeMux\)|^net/http\.\(\*routingNode\)|^net/http\.\(\*pattern\)|^net/url\.PathUnescape|^net/http\.\(\*Request\)\.PathValue`)},
	{"switchboard (lookup, change caps, deadline)", false, regexp.MustCompile(`/bridge\.\(\*Switchboard\)|/bridge\.\(\*changeBuckets\)|/bridge\.ParseCommand|/bridge\.Supports`)},
	{"command to the plug (driver, paho publish)", false, regexp.MustCompile(`/drivers/mqtt\.\(\*device\)\.(Do|await|holdUntilHeard|drop)|/drivers/mqtt\.\(\*driver\)\.(publish|publisher)|paho.*\.\(\*client\)\.Publish|paho.*startOutgoingComms|packets\.\(\*PublishPacket\)\.Write|mqtttest\.\(\*Floor\)\.SwitchAll`)},
	{"the plug's reports (paho read and route, driver)", false, regexp.MustCompile(`paho.*startIncoming|paho.*\(\*router\)|packets\.ReadPacket|/drivers/mqtt\.\(\*driver\)\.(dispatch|notify)|/drivers/mqtt\.\(\*device\)\.apply|/drivers/mqtt\.\(\*driver\)\.connect\.func|/drivers/mqtt\.\(\*bufferedConn\)\.Read|mqtttest\.\(\*Floor\)\.onReply`)},
	{"API handler (the rest)", false, regexp.MustCompile(`/bridge/hub/api\.|mqtttest\.BareHTTPServer`)},
	{"garbage collector", false, regexp.MustCompile(`^runtime\.(gcBgMarkWorker|gcDrain|gcAssist|bgsweep|bgscavenge|markroot|gcStart|gcMarkDone|gcMarkTermination|sweepone|scanobject|scanObject|deductAssistCredit)`)},
	{sysmonComponent, false, regexp.MustCompile(`^runtime\.sysmon`)},
	{"HTTP server (the rest)", true, regexp.MustCompile(`^net/http\.|^net/textproto\.|^bufio\.|^net\.|^internal/poll\.|serveHubVariant|/bridge/daemon\.`)},
	{"MQTT client (the rest)", true, regexp.MustCompile(`paho`)},
	{"allocation", true, regexp.MustCompile(`^runtime\.(mallocgc|newobject|makeslice|growslice|makemap|mapassign|memclr|convT)`)},
	{"scheduler (goroutines and threads parked and woken)", true, regexp.MustCompile(`^runtime\.`)},
}

// sysmonComponent is the runtime's monitor thread, which a profile does
// not sample: its CPU is measured from its thread (sysmonCPU).
const sysmonComponent = "sysmon (the runtime's monitor thread, measured)"

// componentOf names the component of a sample, from its stack (innermost
// function first).
func componentOf(stack []string) string {
	for _, generic := range []bool{false, true} {
		for _, fn := range stack {
			for _, c := range components {
				if c.generic == generic && c.funcs.MatchString(fn) {
					return c.name
				}
			}
		}
	}
	return "other"
}

// printProfileTable splits each profiled side's CPU per command
// (perCmd) by component: sysmon's as measured (sysmon), the rest in the
// shares of its profile in dir (read with go tool pprof -traces).
func printProfileTable(b *testing.B, dir string, names []string, perCmd, sysmon map[string]float64) {
	b.Helper()
	shares := map[string]map[string]float64{}
	for _, name := range names {
		out, err := exec.Command("go", "tool", "pprof", "-traces", filepath.Join(dir, name+".pprof")).Output()
		if err != nil {
			b.Fatalf("go tool pprof -traces %s: %v", name, err)
		}
		byComponent := map[string]float64{}
		var total float64
		for _, trace := range strings.Split(string(out), "-----------+") {
			lines := strings.Split(strings.TrimSpace(trace), "\n")
			if len(lines) < 2 {
				continue
			}
			// The first line is the dashes' rest, then "<n>ms  <innermost>",
			// then one function a line.
			head := strings.Fields(lines[1])
			if len(head) < 2 {
				continue
			}
			d, err := time.ParseDuration(head[0])
			if err != nil {
				continue
			}
			stack := []string{head[1]}
			for _, l := range lines[2:] {
				if f := strings.Fields(l); len(f) > 0 {
					stack = append(stack, f[0])
				}
			}
			byComponent[componentOf(stack)] += float64(d)
			total += float64(d)
		}
		for c := range byComponent {
			byComponent[c] *= (perCmd[name] - sysmon[name]) / total
		}
		byComponent[sysmonComponent] = sysmon[name]
		shares[name] = byComponent
	}
	fmt.Printf("\nWhere the CPU per command goes, µs (the last run's CPU per command split in the shares of its profile; %s)\n", dir)
	fmt.Printf("| component | %s |", strings.Join(names, " | "))
	if len(names) >= 2 {
		fmt.Printf(" %s − %s |", names[1], names[0])
	}
	fmt.Println()
	rows := []string{}
	for _, c := range components {
		rows = append(rows, c.name)
	}
	for _, c := range append(rows, "other") {
		fmt.Printf("| %s |", c)
		for _, n := range names {
			fmt.Printf(" %.1f |", shares[n][c])
		}
		if len(names) >= 2 {
			fmt.Printf(" %+.1f |", shares[names[1]][c]-shares[names[0]][c])
		}
		fmt.Println()
	}
	fmt.Printf("| total |")
	for _, n := range names {
		fmt.Printf(" %.1f |", perCmd[n])
	}
	fmt.Println()
}

// buildRevision builds switchbridge as make dist does from the git
// revision rev of this checkout, exported into dir, and returns the binary.
func buildRevision(b *testing.B, rev, dir string) string {
	b.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		b.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	// From the top: in a subdirectory git archive takes only that.
	archive := exec.Command("git", "archive", "--format=tar", rev)
	archive.Dir = strings.TrimSpace(string(top))
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	untar.Stdin = pipe
	var errb strings.Builder
	archive.Stderr, untar.Stderr = &errb, &errb
	if err := untar.Start(); err != nil {
		b.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		b.Fatalf("git archive %s: %v\n%s", rev, err, errb.String())
	}
	if err := untar.Wait(); err != nil {
		b.Fatalf("tar: %v\n%s", err, errb.String())
	}
	exe := filepath.Join(dir, "switchbridge-"+strings.NewReplacer("/", "_", "~", "_", "^", "_").Replace(rev))
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", exe, "./cmd/switchbridge")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build of %s: %v\n%s", rev, err, out)
	}
	return exe
}

func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// pairedDiff is the mean of a[i] − b[i] and the half-width of its 95 %
// interval (normal approximation: there are hundreds of rounds).
func pairedDiff(a, b []float64) (d, ci float64) {
	n := min(len(a), len(b))
	if n < 2 {
		return 0, 0
	}
	diffs := make([]float64, n)
	for i := range n {
		diffs[i] = a[i] - b[i]
	}
	d = mean(diffs)
	var ss float64
	for _, x := range diffs {
		ss += (x - d) * (x - d)
	}
	return d, 1.96 * math.Sqrt(ss/float64(n-1)/float64(n))
}

// hubVariantEnv makes the test binary serve a hub variant of
// BenchmarkCPUComponents: "config|variant|listen address|profile file"
// (no profile when the last is empty).
const hubVariantEnv = "SWITCHBRIDGE_BENCH_HUB_VARIANT"

// serveHubVariantIfAsked runs a hub variant when hubVariantEnv asks for
// it, until SIGTERM, and reports whether it did.
func serveHubVariantIfAsked() bool {
	spec := os.Getenv(hubVariantEnv)
	if spec == "" {
		return false
	}
	parts := strings.Split(spec, "|")
	if len(parts) != 4 {
		fmt.Fprintf(os.Stderr, "%s=%q: want config|variant|address|profile\n", hubVariantEnv, spec)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := serveHubVariant(ctx, parts[0], parts[1], parts[2], parts[3]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return true
}

// serveHubVariant opens the hub as serve does and serves its installation
// API on listen, without the component variant names. The handler chain is
// the daemon's (refusing Transfer-Encoding, Metrics.Instrument, the mux,
// api.Handler) built again here, where a part can be left out; the
// connection limit's listener is not in it (a cost per connection, and
// the benchmark keeps one). With profile, a CPU profile runs from SIGUSR1
// until the variant stops.
func serveHubVariant(ctx context.Context, cfgPath, variant, listen, profile string) error {
	cfg, err := config.Load(cfgPath, config.ForServe())
	if err != nil {
		return err
	}
	logOut := asynclog.New(os.Stderr, 0)
	defer logOut.Close()
	logger := newLogger(cfg, logOut)
	switch variant {
	case "no-log":
		logger = slog.New(slog.DiscardHandler)
	case "log-unwritten":
		logger = newLogger(cfg, io.Discard)
	}
	d, err := daemon.Open(ctx, cfg, builtin.Registry(), logger)
	if err != nil {
		return err
	}
	defer d.Close()
	if profile != "" {
		defer profileFromSignal(ctx, profile)()
	}

	if variant == "daemon" {
		return d.Serve(ctx)
	}
	var auth bridge.Authorizer = d.OAuth
	if variant == "no-access" {
		auth = &grantOnce{next: d.OAuth}
	}
	// The daemon's switchboard, over the same switches, without the part
	// the variant leaves out.
	so := d.Switchboard.Options()
	switch variant {
	case "no-journal":
		so.Persist = nil
	case "no-audit":
		persist := so.Persist
		so.Persist = func(v bridge.Value, confirmedAt map[string]time.Time, _ []bridge.AuditRecord) error {
			return persist(v, confirmedAt, nil)
		}
	case "no-metrics":
		so.Observe = nil
	case "no-feed":
		so.Feed = nil
	}
	sb, err := bridge.NewSwitchboard(cfg.BridgeLocations(), d.Switchboard.Switches(), so)
	if err != nil {
		return err
	}
	ao := d.API.Options()
	switch variant {
	case "no-ratelimit":
		ao.RateLimit = &api.RateLimit{}
	case "no-feed":
		ao.Feed = nil
	}
	a := api.New(sb, auth, logger.With("component", "api"), ao)
	mux := http.NewServeMux()
	a.Register(mux)
	var h http.Handler = mux
	if variant != "no-metrics" {
		h = d.Metrics.Instrument(mux)
	}
	inner := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
			http.Error(w, "Transfer-Encoding is not accepted", http.StatusBadRequest)
			return
		}
		inner.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      cfg.Server.CommandTimeout.Std() + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	srv.Close()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// profileFromSignal writes a CPU profile to path from the process's
// SIGUSR1 until the returned function is called (or ctx ends first: then
// no profile). A command is a few hundred microseconds, so the rate is
// 1,000 samples a second rather than pprof's 100; the rate set first is
// the one kept (StartCPUProfile's own attempt only prints a warning).
// Linux checks a thread's CPU timer at the scheduler's tick, so a process
// that runs in bursts of microseconds gets about one sample per tick it
// was running at (HZ, not 1,000 a second): the profile's total is a
// fraction of the CPU used, its shares are not, so they are scaled by
// the CPU per command measured beside it.
func profileFromSignal(ctx context.Context, path string) (finish func()) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-usr1:
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		defer f.Close()
		runtime.SetCPUProfileRate(1000)
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		select {
		case <-stop:
		case <-ctx.Done():
		}
		pprof.StopCPUProfile()
	}()
	return func() {
		close(stop)
		<-done
	}
}

// grantOnce is the no-access variant's token check: the first Authorize
// of an installation is the hub's, every later one returns the grant it
// gave, without reading the access generation, the grant cache or
// noting the use.
type grantOnce struct {
	next bridge.Authorizer
	mu   sync.Mutex
	g    map[string]*bridge.Grant
}

func (a *grantOnce) Authorize(ctx context.Context, token, installationID string) (*bridge.Grant, error) {
	a.mu.Lock()
	g, ok := a.g[token+" "+installationID]
	a.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err := a.next.Authorize(ctx, token, installationID)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.g == nil {
		a.g = map[string]*bridge.Grant{}
	}
	a.g[token+" "+installationID] = g
	a.mu.Unlock()
	return g, nil
}
