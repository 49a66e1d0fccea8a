package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge/config"
)

const (
	rulesFile     = "switchbridge.rules.yml"
	rulesTestFile = "switchbridge.rules.test.yml"
	scrapeFile    = "prometheus.yml"
	// installedDir is where the Debian package puts these files
	// (systemd/deb/nfpm.yaml); prometheus.yml names the rules there.
	installedDir = "/usr/share/switchbridge/monitoring"
)

// need finds a tool. Without it the test skips, except under CI, where a
// skipped check would let a regression through.
func need(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (CI=true): apt-get install %s", name, pkg)
		}
		t.Skipf("%s not found: apt-get install %s to run this check", name, pkg)
	}
	return p
}

func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(need(t, "promtool", "prometheus"), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rules is the part of a rules file these tests read.
type rules struct {
	Groups []struct {
		Rules []struct {
			Alert  string            `yaml:"alert"`
			Record string            `yaml:"record"`
			Expr   string            `yaml:"expr"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readRules(t *testing.T) rules {
	t.Helper()
	var r rules
	if err := yaml.Unmarshal(readFile(t, rulesFile), &r); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return r
}

// TestRules checks the rules with promtool check rules (syntax, templates,
// duplicates) and runs their unit tests with promtool test rules.
func TestRules(t *testing.T) {
	out := promtool(t, ".", "check", "rules", rulesFile)
	t.Logf("promtool check rules:\n%s", out)
	out = promtool(t, ".", "test", "rules", rulesTestFile)
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules did not report SUCCESS:\n%s", out)
	}
}

// TestEveryAlertTested: the rules' unit tests expect each alert to fire
// somewhere (a positive case) and to stay quiet somewhere (a negative
// case), and each alert has a severity; an alert added without its tests
// fails here, since promtool test rules only checks the alerts a test
// names.
func TestEveryAlertTested(t *testing.T) {
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name          string `yaml:"name"`
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []struct {
					ExpLabels map[string]string `yaml:"exp_labels"`
				} `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(readFile(t, rulesTestFile), &tests); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	if len(tests.RuleFiles) != 1 || tests.RuleFiles[0] != rulesFile {
		t.Errorf("%s tests %v, want [%s]", rulesTestFile, tests.RuleFiles, rulesFile)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] {
				t.Errorf("no test expects %s to fire", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("no test expects %s to stay quiet", r.Alert)
			}
			switch r.Labels["severity"] {
			case "critical", "warning", "info":
			default:
				t.Errorf("%s has severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
			}
		}
	}
	if n == 0 {
		t.Fatalf("no alerts in %s", rulesFile)
	}
}

// TestScrapeConfig checks prometheus.yml with promtool check config, its
// rules path pointed at this directory's file in place of the installed
// one, and that it scrapes the job the rules name at the metrics
// listener's default address, reading the rules where the package puts
// them.
func TestScrapeConfig(t *testing.T) {
	text := string(readFile(t, scrapeFile))
	installed := installedDir + "/" + rulesFile
	if !strings.Contains(text, "  - "+installed+"\n") {
		t.Errorf("%s does not load %s", scrapeFile, installed)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.ScrapeConfigs) != 1 || cfg.ScrapeConfigs[0].JobName != "switchbridge" ||
		len(cfg.ScrapeConfigs[0].StaticConfigs) != 1 ||
		strings.Join(cfg.ScrapeConfigs[0].StaticConfigs[0].Targets, ",") != config.DefaultMetricsListen {
		t.Errorf("%s scrapes %+v, want job switchbridge at %s", scrapeFile, cfg.ScrapeConfigs, config.DefaultMetricsListen)
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			for _, generic := range []string{"up{", "process_start_time_seconds{", "promhttp_"} {
				if strings.Contains(r.Expr, generic) && !strings.Contains(r.Expr, `job="switchbridge"`) {
					t.Errorf("%s uses %s without job=\"switchbridge\": it would match every job", r.Alert, strings.TrimSuffix(generic, "{"))
				}
			}
		}
	}

	dir := t.TempDir()
	local, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, scrapeFile), []byte(strings.ReplaceAll(text, installed, local)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := promtool(t, dir, "check", "config", scrapeFile)
	if !strings.Contains(out, "SUCCESS: 1 rule files found") {
		t.Errorf("promtool check config did not load the rules:\n%s", out)
	}
	t.Logf("promtool check config:\n%s", out)
}
