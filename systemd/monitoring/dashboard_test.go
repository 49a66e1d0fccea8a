package monitoring

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

const dashboardFile = "switchbridge.dashboard.json"

// meteringOnly are the names a hub exports only for a switch whose device
// has reported power, energy, voltage or current, which the live hubs
// below have none of: the dashboard may use them unseen. A name leaves
// the list once the live check makes a plug report it.
var meteringOnly = []string{
	"switchbridge_switch_power_watts",
	"switchbridge_switch_energy_kwh_total",
	"switchbridge_switch_voltage_volts",
	"switchbridge_switch_current_amperes",
}

// fromPrometheus are the names Prometheus makes itself for each target,
// which no hub exports.
var fromPrometheus = []string{"up"}

// promqlWords are the PromQL words that are not metric names when they
// stand without a parenthesis after them: binary operators, modifiers and
// literals.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true,
	"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "bool": true, "offset": true,
	"inf": true, "nan": true,
}

// aggregations are PromQL's aggregation operators, which may take their
// by/without clause before their parenthesis (sum by (le) (…)).
var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
}

// labelLists are the words a parenthesized list of label names follows.
var labelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true,
}

// metricNames returns the metric names a PromQL expression reads, in
// order of first use: each identifier that is not a function or
// aggregation (followed by "("), a keyword, a label name (inside {…}, or
// in by/without/on/ignoring/group_left/group_right lists), a duration
// (inside […], or after offset), a number or a string. Grafana's
// variables ($x, ${x}) are skipped where they stand, so $__rate_interval
// in a range is as good as a duration. It fails on what it cannot read,
// rather than guess.
func metricNames(expr string) ([]string, error) {
	var names []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
			i++
		}
		return i
	}
	// stringEnd returns the index just past the string that starts at i
	// (a backquoted one has no escapes).
	stringEnd := func(i int) (int, error) {
		q := expr[i]
		for j := i + 1; j < len(expr); j++ {
			switch {
			case expr[j] == '\\' && q != '`':
				j++
			case expr[j] == q:
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d in %q", i, expr)
	}
	// closing returns the index just past the bracket that closes the one
	// at i, skipping strings inside.
	closing := func(i int, open, close byte) (int, error) {
		depth := 0
		for j := i; j < len(expr); {
			switch c := expr[j]; c {
			case '"', '\'', '`':
				end, err := stringEnd(j)
				if err != nil {
					return 0, err
				}
				j = end
				continue
			case open:
				depth++
			case close:
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
			j++
		}
		return 0, fmt.Errorf("unbalanced %c at %d in %q", open, i, expr)
	}
	wordAt := func(i int) string {
		j := i
		for j < len(expr) && isPart(expr[j]) {
			j++
		}
		return expr[i:j]
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '{':
			end, err := closing(i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '[':
			end, err := closing(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '"' || c == '\'' || c == '`':
			end, err := stringEnd(i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$':
			// A Grafana variable: $name or ${name}.
			i++
			if i < len(expr) && expr[i] == '{' {
				end, err := closing(i, '{', '}')
				if err != nil {
					return nil, err
				}
				i = end
				continue
			}
			for i < len(expr) && isPart(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number or a duration: 0.95, 1e3, 0x1f, 5m, 1h30m.
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.') {
				i++
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			next := skipSpace(j)
			switch {
			case labelLists[strings.ToLower(word)] && next < len(expr) && expr[next] == '(':
				end, err := closing(next, '(', ')')
				if err != nil {
					return nil, err
				}
				i = end
				continue
			case promqlWords[strings.ToLower(word)]:
			case aggregations[strings.ToLower(word)] && labelLists[strings.ToLower(wordAt(next))]:
				// An aggregation with its clause first.
			case next < len(expr) && expr[next] == '(':
				// A function or an aggregation.
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
			i = j
		case strings.ContainsRune(" \t\r\n()+-*/%^=!<>,~", rune(c)):
			i++
		default:
			return nil, fmt.Errorf("unexpected %q at %d in %q", c, i, expr)
		}
	}
	return names, nil
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up{job="switchbridge"} == 0`, []string{"up"}},
		{`switchbridge_switch_available`, []string{"switchbridge_switch_available"}},
		{`histogram_quantile(0.95, sum by (le, route) (rate(switchbridge_http_request_duration_seconds_bucket{instance=~"$instance"}[$__rate_interval])))`,
			[]string{"switchbridge_http_request_duration_seconds_bucket"}},
		{`sum(rate(a_total[5m])) without (instance) / on (job) group_left (name, version) b_info`, []string{"a_total", "b_info"}},
		{`increase(switchbridge_switch_energy_kwh_total{switch=~"$switch"}[1d]) offset 1h`, []string{"switchbridge_switch_energy_kwh_total"}},
		{`time() - process_start_time_seconds{job="switchbridge"}`, []string{"process_start_time_seconds"}},
		{`count(x == 0) or vector(0)`, []string{"x"}},
		{`a > bool 1 and b unless c`, []string{"a", "b", "c"}},
		{`max_over_time(deriv(d[30m:1m])[1h:]) * 1e3`, []string{"d"}},
		{`sum by(le)(rate(h_bucket{route="/x{y}", by="z"}[${__range}]))`, []string{"h_bucket"}},
		{`label_join(m{a="\"}"}, "dst", ",", "a")`, []string{"m"}},
		{`sum(m) BY (switch)`, []string{"m"}},
		{`count without (a) (m) / sum(byte_count)`, []string{"m", "byte_count"}},
	} {
		got, err := metricNames(tc.expr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%s) = %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
	for _, bad := range []string{`a{b="c"`, `rate(a[5m)`, `a{b="c}`, `a # b`} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%s) = %q, want an error", bad, got)
		}
	}
}

// dashboardQueries returns every PromQL expression of the dashboard: its
// panels' targets (rows' panels included) and its query variables'
// label_values(…) arguments, each with where it was found.
func dashboardQueries(t *testing.T, d map[string]any) map[string]string {
	t.Helper()
	queries := map[string]string{}
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if title, ok := v["title"].(string); ok {
				where += " > " + title
			}
			if e, ok := v["expr"].(string); ok {
				queries[where+" "+fmt.Sprint(v["refId"])] = e
			}
			for _, x := range v {
				walk(where, x)
			}
		case []any:
			for _, x := range v {
				walk(where, x)
			}
		}
	}
	walk("panels", d["panels"])
	tl, _ := d["templating"].(map[string]any)
	vars, _ := tl["list"].([]any)
	for _, v := range vars {
		v := v.(map[string]any)
		if v["type"] != "query" {
			continue
		}
		q := v["query"]
		if m, ok := q.(map[string]any); ok {
			q = m["query"]
		}
		s, _ := q.(string)
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("variable %v: query %q is not label_values(<selector>, <label>)", v["name"], s)
			continue
		}
		queries["variable "+fmt.Sprint(v["name"])] = m[1]
	}
	return queries
}

func readDashboard(t *testing.T) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(readFile(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// TestDashboardShape: a dashboard current Grafana imports as it is and
// provisions from a file, its data source chosen by a variable (no
// ${DS_…} input to fill in); every panel has queries, through that
// variable; panel ids are unique; every panel this test expects is there.
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t)
	if v, _ := d["schemaVersion"].(float64); v < 39 {
		t.Errorf("schemaVersion %v, want 39 or later", d["schemaVersion"])
	}
	if d["uid"] != "switchbridge" || d["title"] != "switchbridge" {
		t.Errorf("uid %v, title %v", d["uid"], d["title"])
	}
	if strings.Contains(string(readFile(t, dashboardFile)), "${DS_") {
		t.Error("the dashboard names a ${DS_…} input: provisioning from a file would not fill it in")
	}
	tl, _ := d["templating"].(map[string]any)
	vars, _ := tl["list"].([]any)
	dsVar := false
	for _, v := range vars {
		v := v.(map[string]any)
		if v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus" {
			dsVar = true
		}
	}
	if !dsVar {
		t.Error("no datasource variable of type prometheus")
	}
	ids := map[float64]bool{}
	titles := map[string]bool{}
	panels, _ := d["panels"].([]any)
	for _, p := range panels {
		p := p.(map[string]any)
		id, _ := p["id"].(float64)
		if ids[id] {
			t.Errorf("panel id %v used twice", id)
		}
		ids[id] = true
		title, _ := p["title"].(string)
		titles[title] = true
		if p["type"] == "row" {
			continue
		}
		targets, _ := p["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("panel %q has no queries", title)
		}
		for _, x := range append([]any{p}, targets...) {
			ds, _ := x.(map[string]any)["datasource"].(map[string]any)
			if ds["type"] != "prometheus" || ds["uid"] != "${datasource}" {
				t.Errorf("panel %q: data source %v, want the datasource variable", title, ds)
			}
		}
	}
	for _, want := range []string{"State", "Availability", "Last seen", "Power", "Energy per day",
		"Commands by outcome", "Failed commands by switch", "Command latency", "Platform link", "Webhook deliveries", "Webhook outbox"} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}

// liveNames returns the metric names a scrape of addr exposes (a
// histogram's _bucket, _sum and _count series as themselves).
func liveNames(t *testing.T, addr string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		if i := strings.IndexAny(l, "{ "); i > 0 {
			names[l[:i]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// exported is every metric name live hubs export once they have done
// what the dashboard shows: a hub with a virtual switch and an MQTT plug
// on its embedded broker, an app installed and a command run through the
// API (so the per-switch command series and the command and request
// histograms exist), and a hub linked to a platform (the link's metrics;
// the platform is a closed loopback port, so the link stays down, which
// exports the same names).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	mqttAddr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	h := daemontest.StartWith(t, daemontest.Options{Metrics: true, Config: fmt.Sprintf(`mqtt:
  broker: embedded
  listen: %s
  users:
    plug: {password: plug-s3cret-pw, switches: [plug]}
locations:
  - id: 1
    name: Home
    switches:
      - {id: lamp, name: Lamp, driver: virtual, initial: off}
      - {id: plug, name: Plug, driver: mqtt, profile: tasmota, topic: plug1}
`, mqttAddr)})
	owner := h.AddUser(t, "ann", "ann-pw-monitoring", 1)
	app := h.AddApp(t, owner, true, "https://client.example/cb")
	g := h.Authorize(t, app, "ann", "ann-pw-monitoring", 1, "lamp")
	if p := h.Command(t, g, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT /switches/on = %d %s", p.StatusCode, p.Body)
	}
	names := liveNames(t, h.MetricsAddr().String())

	dir := t.TempDir()
	secret := filepath.Join(dir, "hub.secret")
	if err := os.WriteFile(secret, []byte("hub-s3cret-hub-s3cret-hub-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	closed := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	linked := daemontest.StartWith(t, daemontest.Options{Metrics: true, Config: fmt.Sprintf(`platform:
  url: http://%s
  hub_id: hub-1
  secret_file: %s
locations:
  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}
`, closed, secret)})
	for n := range liveNames(t, linked.MetricsAddr().String()) {
		names[n] = true
	}
	return names
}

// TestDashboardAndRulesUseExportedMetrics: every metric name the
// dashboard's queries and the alerting rules read is one live hubs
// export (or one of meteringOnly, or Prometheus' own up), so no panel
// stays empty and no alert stays silent for a name that does not exist.
func TestDashboardAndRulesUseExportedMetrics(t *testing.T) {
	queries := dashboardQueries(t, readDashboard(t))
	if len(queries) < 20 {
		t.Fatalf("only %d queries found in the dashboard", len(queries))
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			queries["rule "+r.Alert+r.Record] = r.Expr
		}
	}
	live := exported(t)
	// The names the hubs must export for the check to mean anything.
	for _, n := range []string{"switchbridge_switch_state", "switchbridge_switch_available", "switchbridge_switch_last_seen_timestamp_seconds",
		"switchbridge_switch_commands_total", "switchbridge_switch_command_duration_seconds_bucket", "switchbridge_mqtt_connected",
		"switchbridge_platform_link_up", "switchbridge_webhook_outbox_depth", "process_start_time_seconds"} {
		if !live[n] {
			t.Errorf("the live hubs do not export %s", n)
		}
	}
	for _, n := range meteringOnly {
		if live[n] {
			t.Errorf("the live hubs export %s: take it off meteringOnly", n)
		}
	}
	used := map[string][]string{}
	for where, q := range queries {
		names, err := metricNames(q)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q reads no metric", where, q)
		}
		for _, n := range names {
			used[n] = append(used[n], where)
			if !live[n] && !slices.Contains(meteringOnly, n) && !slices.Contains(fromPrometheus, n) {
				t.Errorf("%s reads %s, which the hub does not export", where, n)
			}
		}
	}
	var list []string
	for n, w := range used {
		list = append(list, fmt.Sprintf("%s (%d)", n, len(w)))
	}
	sort.Strings(list)
	t.Logf("%d queries read %d metrics: %s", len(queries), len(used), strings.Join(list, ", "))
}
