package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/config"
)

// TestBadConfigs loads each testdata/*.bad.yaml and checks that every
// expected problem is reported with its line, and nothing is accepted.
func TestBadConfigs(t *testing.T) {
	want := map[string][]string{
		"unknown-keys.bad.yaml": {
			`:3: unknown key "lissen" in server`,
			`:7: unknown key "colour" in locations[0]`,
		},
		"bad-values.bad.yaml": {
			`:4: "soon" is not a duration (examples: 5s, 10m, 2160h)`,
		},
		"duplicates.bad.yaml": {
			`:6: locations[1]: id 1 is already used at line 2`,
			`:9: locations[1].switches[0]: switch id "lamp" is already used at line 5`,
		},
		"syntax.bad.yaml": {`:2: did not find expected ',' or ']'`},
		"empty.bad.yaml":  {`the config is empty`},
		"types.bad.yaml": {
			`:1: cannot unmarshal !!seq into string`,
			`:3: cannot unmarshal !!str ` + "`one`" + ` into int64`,
			`:5: cannot unmarshal !!str ` + "`lamp`" + ` into []config.Switch`,
		},
	}
	files, _ := filepath.Glob("testdata/*.bad.yaml")
	if len(files) != len(want) {
		t.Errorf("%d bad configs in testdata, %d expectations", len(files), len(want))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := config.Load(f)
			if err == nil {
				t.Fatal("accepted")
			}
			if !config.IsProblems(err) {
				t.Errorf("error is not a problem list: %v", err)
			}
			for _, w := range want[filepath.Base(f)] {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in:\n%s", w, err)
				}
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, f) {
					t.Errorf("problem does not name the file: %q", line)
				}
			}
		})
	}
}

// TestSemanticProblemsAllReported checks that the semantic rules report
// every broken rule at once, each at its line.
func TestSemanticProblemsAllReported(t *testing.T) {
	src := `server:
  listen: nowhere
  public_url: ftp://hub.local/
oauth:
  code_lifetime: 48h
log:
  format: xml
locations:
  - id: 0
    name: ""
    switches:
      - {id: "bad id!", name: A, driver: virtual}
      - {id: b, driver: virtual}
      - {id: c, name: C}
`
	_, err := config.Parse([]byte(src), "x.yaml")
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{
		`x.yaml:2: server.listen "nowhere" is not host:port`,
		`x.yaml:3: server.public_url "ftp://hub.local" must be an absolute http(s) URL`,
		`x.yaml:5: oauth.code_lifetime must be between 1s and 24h`,
		`x.yaml:7: log.format must be text or json`,
		`x.yaml:9: locations[0]: id must be a positive number`,
		`x.yaml:9: locations[0]: name is required`,
		`x.yaml:12: locations[0].switches[0]: id "bad id!" must be`,
		`x.yaml:13: locations[0].switches[1]: name is required`,
		`x.yaml:14: locations[0].switches[2]: driver is required`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in:\n%s", w, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Setenv("STATE_DIRECTORY", "/var/lib/switchbridge-test")
	cfg, err := config.Parse([]byte("locations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Listen != config.DefaultListen || cfg.Server.MetricsListen != config.DefaultMetricsListen {
		t.Errorf("listen defaults = %q %q", cfg.Server.Listen, cfg.Server.MetricsListen)
	}
	if cfg.DataDir != "/var/lib/switchbridge-test" {
		t.Errorf("data_dir = %q, want systemd's STATE_DIRECTORY", cfg.DataDir)
	}
	if cfg.OAuth.CodeLifetime.Std() != 10*time.Minute || cfg.OAuth.TokenLifetime.Std() != 90*24*time.Hour {
		t.Errorf("lifetimes = %s %s", cfg.OAuth.CodeLifetime.Std(), cfg.OAuth.TokenLifetime.Std())
	}
	if cfg.Server.CommandTimeout.Std() != 5*time.Second {
		t.Errorf("command_timeout = %s", cfg.Server.CommandTimeout.Std())
	}
	sw := cfg.Locations[0].Switches[0]
	if sw.ID != "a" || sw.Driver != "virtual" || len(sw.Options.Content) != 0 {
		t.Errorf("switch = %+v", sw)
	}
}

func TestDecodeStrictReportsNestedKeys(t *testing.T) {
	type inner struct {
		Port int `yaml:"port"`
	}
	type outer struct {
		Name  string           `yaml:"name"`
		Inner inner            `yaml:"inner"`
		List  []inner          `yaml:"list"`
		Map   map[string]inner `yaml:"map"`
	}
	src := "name: x\ninner: {port: 1, host: h}\nlist:\n  - {port: 2, pot: 3}\nmap:\n  a: {prt: 1}\nextra: 1\n"
	var o outer
	err := config.DecodeStrict(mustNode(t, src), &o)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{`line 2: unknown key "host" in inner`, `line 4: unknown key "pot" in list[0]`, `line 6: unknown key "prt" in map.a`, `line 7: unknown key "extra"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in:\n%s", w, err)
		}
	}
}

func TestShippedConfigsParse(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) == 0 {
		t.Fatal("no configs/*.yaml")
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if _, err := config.Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestAdvertisedURL(t *testing.T) {
	cases := []struct{ publicURL, listen, bound, want string }{
		{"https://hub.example", "0.0.0.0:8080", "", "https://hub.example"},
		{"", "127.0.0.1:8080", "", "http://127.0.0.1:8080"},
		{"", "0.0.0.0:8080", "", "http://127.0.0.1:8080"},
		{"", ":8080", "", "http://127.0.0.1:8080"},
		{"", "[::]:8080", "", "http://127.0.0.1:8080"},
		{"", "192.168.1.5:8080", "", "http://192.168.1.5:8080"},
		{"", "127.0.0.1:0", "127.0.0.1:41234", "http://127.0.0.1:41234"},
		{"", "[::1]:8080", "", "http://[::1]:8080"},
	}
	for _, c := range cases {
		cfg := &config.Config{Server: config.Server{PublicURL: c.publicURL, Listen: c.listen}}
		if got := cfg.AdvertisedURL(c.bound); got != c.want {
			t.Errorf("public_url %q listen %q bound %q: %s, want %s", c.publicURL, c.listen, c.bound, got, c.want)
		}
	}
}

func TestPublicURLMustNotHaveAPath(t *testing.T) {
	base := "locations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"
	for url, ok := range map[string]bool{
		"https://hub.example":      true,
		"https://hub.example/":     true, // the trailing slash is dropped
		"http://hub.local:8080":    true,
		"https://proxy.example/sb": false,
		"https://hub.example?x=1":  false,
		"https://user@hub.example": false,
		"ftp://hub.example":        false,
	} {
		_, err := config.Parse([]byte("server: {public_url: \""+url+"\"}\n"+base), "x.yaml")
		if (err == nil) != ok {
			t.Errorf("public_url %s: %v", url, err)
		}
	}
}
