package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/config/configtest"
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
		"limits.bad.yaml": {
			`:2: server.max_connections must be between 1 and 65536, not -5`,
			`:3: "lots" is not a size (examples: 128MiB, 1GiB, off)`,
		},
		"listen.bad.yaml": {
			`:2: server.listen "127.0.0.1:99999" port 99999 is out of range (0 to 65535)`,
			`:3: server.metrics_listen "localhost:" has no port (or off)`,
		},
		"storage.bad.yaml": {
			`:3: storage.postgres is for a platform: a hub keeps its replica in SQLite`,
			`:5: demo is for trying switchbridge on one machine, not on PostgreSQL`,
			`:8: a platform on PostgreSQL has no switches of its own`,
		},
		"storage-empty.bad.yaml": {`:2: storage.postgres needs dsn_file`},
		"confirm.bad.yaml": {
			`:5: confirm must be true or false, not "yes"`,
			`:6: confirm must be true or false`,
		},
		"url-userinfo.bad.yaml": {
			`:2: server.public_url "https://…@hub.example.net" must be an absolute http(s) URL without user`,
			`:5: platform.url "http://…@platform.example.net:8080" must be the platform's public URL`,
		},
		"dsn-url.bad.yaml":      {`:4: storage.postgres.dsn_file must be the path of a file, but its value looks like a connection string`},
		"dsn-keyvalue.bad.yaml": {`:3: storage.postgres.dsn_file must be the path of a file`},
		"dsn-userinfo.bad.yaml": {`:3: storage.postgres.dsn_file must be the path of a file`},
		"syntax.bad.yaml":       {`:2: did not find expected ',' or ']'`},
		"empty.bad.yaml":        {`the config is empty`},
		"audit.bad.yaml": {
			`:2: audit.max_age must be between 1m and 87600h (10 years), not 0s; the default is 720h (30 days)`,
			`:3: audit.max_rows must be between 1 and 10000000, not 0; the default is 100000`,
		},
		"audit-range.bad.yaml": {
			`:1: audit.max_age must be between 1m and 87600h (10 years), not 100000h`,
			`:1: audit.max_rows must be between 1 and 10000000, not 20000000`,
		},
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
			// The bad configs' passwords all start so: no problem may
			// repeat one.
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("a problem repeats a password of the config:\n%s", err)
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
	_, err := config.Load("x.yaml", config.Text(src))
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
	cfg, err := config.Load("x.yaml", config.Text("locations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"))
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
	if cfg.Server.MaxConnections != 256 || cfg.Server.MemoryLimit != 128<<20 {
		t.Errorf("max_connections %d, memory_limit %s; want 256 and 128MiB", cfg.Server.MaxConnections, cfg.Server.MemoryLimit)
	}
	if cfg.Server.CommandTimeout.Std() != 5*time.Second {
		t.Errorf("command_timeout = %s", cfg.Server.CommandTimeout.Std())
	}
	if cfg.Audit.MaxAge.Std() != 30*24*time.Hour || cfg.Audit.MaxRows != 100000 {
		t.Errorf("audit = %s, %d rows; want 30 days and 100000 rows", cfg.Audit.MaxAge.Std(), cfg.Audit.MaxRows)
	}
	sw := cfg.Locations[0].Switches[0]
	if sw.ID != "a" || sw.Driver != "virtual" || len(sw.Options.Content) != 0 {
		t.Errorf("switch = %+v", sw)
	}
}

// TestAuditSection: the bounds given are taken, one left out keeps its
// default.
func TestAuditSection(t *testing.T) {
	const base = "locations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"
	cfg, err := config.Load("x.yaml", config.Text("audit: {max_age: 168h, max_rows: 500}\n"+base))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Audit.MaxAge.Std() != 7*24*time.Hour || cfg.Audit.MaxRows != 500 {
		t.Errorf("audit = %s, %d rows; want 168h and 500", cfg.Audit.MaxAge.Std(), cfg.Audit.MaxRows)
	}
	cfg, err = config.Load("x.yaml", config.Text("audit:\n  max_rows: 10\n"+base))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Audit.MaxAge.Std() != 30*24*time.Hour || cfg.Audit.MaxRows != 10 {
		t.Errorf("audit = %s, %d rows; want the default age and 10", cfg.Audit.MaxAge.Std(), cfg.Audit.MaxRows)
	}
	if _, err := config.Load("x.yaml", config.Text("audit: {max_age: soon}\n"+base)); err == nil || !strings.Contains(err.Error(), `x.yaml:1: "soon" is not a duration`) {
		t.Errorf("audit.max_age: soon: %v", err)
	}
	if _, err := config.Load("x.yaml", config.Text("audit: {max_rowz: 5}\n"+base)); err == nil || !strings.Contains(err.Error(), `unknown key "max_rowz" in audit`) {
		t.Errorf("audit.max_rowz: %v", err)
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
		_, err := config.Load("x.yaml", config.Text("server: {public_url: \""+url+"\"}\n"+base))
		if (err == nil) != ok {
			t.Errorf("public_url %s: %v", url, err)
		}
	}
}

// TestTLSKeys checks server.tls: both files are required, public_url must
// then be https, and the advertised URL defaults to https://<listen>.
func TestTLSKeys(t *testing.T) {
	base := "locations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"
	cfg, err := config.Load("x.yaml", config.Text("server:\n  listen: 0.0.0.0:8443\n  tls:\n    cert_file: /etc/ssl/hub.pem\n    key_file: /etc/ssl/hub.key\n"+base))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.AdvertisedURL(""); got != "https://127.0.0.1:8443" {
		t.Errorf("advertised URL with tls and no public_url = %s, want https://127.0.0.1:8443", got)
	}
	if cfg.Server.TLS != (config.TLS{CertFile: "/etc/ssl/hub.pem", KeyFile: "/etc/ssl/hub.key", HSTSMaxAge: config.Duration(config.DefaultHSTSMaxAge)}) || cfg.TLSLine != 4 {
		t.Errorf("tls = %+v at line %d", cfg.Server.TLS, cfg.TLSLine)
	}
	if cfg, err := config.Load("x.yaml", config.Text("server:\n  public_url: HTTPS://hub.example\n  tls: {cert_file: c, key_file: k}\n"+base)); err != nil || cfg.AdvertisedURL("") != "HTTPS://hub.example" {
		t.Errorf("https public_url in capitals refused: %v", err)
	}
	if cfg.Server.TLS.HSTS() != config.DefaultHSTSMaxAge {
		t.Errorf("HSTS max-age by default = %s, want %s", cfg.Server.TLS.HSTS(), config.DefaultHSTSMaxAge)
	}
	for v, want := range map[string]time.Duration{"0s": 0, "24h": 24 * time.Hour} {
		src := "server:\n  tls: {cert_file: c, key_file: k, hsts_max_age: " + v + "}\n" + base
		cfg, err := config.Load("x.yaml", config.Text(src))
		if err != nil || cfg.Server.TLS.HSTS() != want {
			t.Errorf("hsts_max_age %s: %v, %v", v, cfg.Server.TLS.HSTS(), err)
			continue
		}
		// A reload compares server sections with ==: the same text must
		// give the same value, or every SIGHUP would warn that it changed.
		if again, _ := config.Load("x.yaml", config.Text(src)); again.Server != cfg.Server {
			t.Errorf("hsts_max_age %s: the same server section read twice differs", v)
		}
	}
	if cfg, err := config.Load("x.yaml", config.Text(base)); err != nil || cfg.Server.TLS.Enabled() || cfg.TLSLine != 0 {
		t.Errorf("no tls section: enabled %v, line %d, %v", cfg.Server.TLS.Enabled(), cfg.TLSLine, err)
	}

	for src, want := range map[string]string{
		"server:\n  public_url: http://hub.local:8443\n  tls: {cert_file: c, key_file: k}\n": `x.yaml:2: server.public_url "http://hub.local:8443" must be https:// when server.tls is set`,
		"server:\n  public_url: HTTP://hub.local\n  tls: {cert_file: c, key_file: k}\n":      `x.yaml:2: server.public_url "HTTP://hub.local" must be https://`,
		"server:\n  tls:\n    cert_file: c\n":                                                `x.yaml:3: server.tls needs both cert_file and key_file`,
		"server:\n  tls: {key_file: k}\n":                                                    `x.yaml:2: server.tls needs both cert_file and key_file`,
		"server:\n  tls:\n":                                                                  `x.yaml:2: server.tls needs both cert_file and key_file`,
		"server:\n  tls: {cert_file: c, key_file: k, ca_file: x}\n":                          `x.yaml:2: unknown key "ca_file" in server.tls`,
		"server:\n  tls: {cert_file: c, key_file: k, hsts_max_age: -1s}\n":                   `server.tls.hsts_max_age must be whole seconds, 0 or more`,
		"server:\n  tls: {cert_file: c, key_file: k, hsts_max_age: 1500ms}\n":                `server.tls.hsts_max_age must be whole seconds, 0 or more`,
	} {
		_, err := config.Load("x.yaml", config.Text(src+base))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", src, err, want)
		}
	}
}

func TestTrustedProxies(t *testing.T) {
	base := "locations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"
	cfg, err := config.Load("x.yaml", config.Text("server:\n  trusted_proxies: [127.0.0.1, \"::1\", 192.168.1.0/24, \"2001:db8::/32\", \"::ffff:10.0.0.1\"]\n"+base))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range cfg.Server.TrustedProxies.List() {
		got = append(got, p.String())
	}
	if want := "127.0.0.1/32 ::1/128 192.168.1.0/24 2001:db8::/32 10.0.0.1/32"; strings.Join(got, " ") != want {
		t.Errorf("trusted_proxies = %v, want %s", got, want)
	}
	// The section stays comparable and equal for equal text: a reload
	// does not warn about a server section that did not change.
	again, _ := config.Load("y.yaml", config.Text("server:\n  trusted_proxies: [127.0.0.1, \"::1\", 192.168.1.0/24, \"2001:db8::/32\", \"::ffff:10.0.0.1\"]\n"+base))
	if again.Server != cfg.Server {
		t.Error("equal trusted_proxies compare unequal")
	}
	if none, _ := config.Load("z.yaml", config.Text(base)); len(none.Server.TrustedProxies.List()) != 0 {
		t.Errorf("default trusted_proxies = %v, want none", none.Server.TrustedProxies.List())
	}

	_, err = config.Load("x.yaml", config.Text("server:\n  trusted_proxies:\n    - 10.0.0.1/8\n    - proxy.lan\n    - \"fe80::1%eth0\"\n    - 10.0.0.0/8\n"+base))
	if err == nil {
		t.Fatal("bad trusted_proxies accepted")
	}
	for _, w := range []string{
		`x.yaml:3: "10.0.0.1/8" has bits set past its prefix length: write 10.0.0.0/8 for the network or 10.0.0.1 for one address`,
		`x.yaml:4: "proxy.lan" is not an IP address or CIDR network`,
		`x.yaml:5: "fe80::1%eth0" is not an IP address or CIDR network`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in:\n%s", w, err)
		}
	}
	if _, err := config.Load("x.yaml", config.Text("server:\n  trusted_proxies: 10.0.0.1\n"+base)); err == nil || !strings.Contains(err.Error(), "x.yaml:2: must be a list") {
		t.Errorf("a scalar trusted_proxies: %v", err)
	}
}

// TestDemoOnlyOnLoopback: the demo user's password is in the config, so a
// hub others can reach refuses to start with it.
func TestDemoOnlyOnLoopback(t *testing.T) {
	base := "demo:\n  user: demo\n  password: demo\nlocations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"
	for listen, ok := range map[string]bool{
		"127.0.0.1:8080":     true,
		"127.0.0.2:8080":     true,
		"[::1]:8080":         true,
		"localhost:8080":     true,
		"0.0.0.0:8080":       false,
		":8080":              false,
		"[::]:8080":          false,
		"192.168.1.5:8080":   false,
		"hub.example.org:80": false,
	} {
		_, err := config.Load("x.yaml", config.Text("server: {listen: \""+listen+"\"}\n"+base))
		if ok && err != nil {
			t.Errorf("listen %s: %v", listen, err)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), "x.yaml:3: demo is only for trying the hub on this machine")) {
			t.Errorf("listen %s with demo: %v, want a refusal at the demo line", listen, err)
		}
	}
}

// TestListenHostChecks checks that check-config (ForServe, AllProblems)
// and serve (ForServe) refuse listen addresses this machine cannot bind,
// each at its line, while a reload (Load without ForServe) does not look
// them up.
func TestListenHostChecks(t *testing.T) {
	configtest.UseHosts(t)
	bad := "testdata/host/unresolvable.yaml"
	want := []string{
		bad + `:4: server.listen "no-such-host.invalid:8080": host "no-such-host.invalid" does not resolve`,
		bad + `:5: server.metrics_listen "192.0.2.1:9180": 192.0.2.1 is not an address of this machine`,
	}
	ps := &config.Problems{}
	if _, err := config.Load(bad, config.ForServe(), config.AllProblems(ps)); err != nil {
		t.Fatal(err)
	}
	_, serr := config.Load(bad, config.ForServe())
	for name, err := range map[string]error{"ForServe, AllProblems": ps.Err(), "ForServe": serr} {
		if err == nil {
			t.Errorf("%s accepted %s", name, bad)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: missing %q in:\n%s", name, w, err)
			}
		}
	}
	if _, err := config.Load(bad); err != nil {
		t.Errorf("Load (used by reload) looked up the listen addresses: %v", err)
	}
	good := "testdata/host/local.yaml"
	if _, err := config.Load(good, config.ForServe()); err != nil {
		t.Errorf("%s: %v", good, err)
	}
	ps = &config.Problems{}
	if _, err := config.Load(good, config.ForServe(), config.AllProblems(ps)); err != nil || ps.Err() != nil {
		t.Errorf("%s: %v, %v", good, err, ps.Err())
	}
}

// TestAllProblems checks what check-config relies on: with AllProblems,
// Load returns what it could decode beside every problem, so the drivers'
// keys can be checked too; without it, a config with problems is refused;
// a file that cannot be read is an error, not a problem.
func TestAllProblems(t *testing.T) {
	src := "server: {listen: nowhere}\nlog: {level: loud}\nlocations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"
	ps := &config.Problems{}
	cfg, err := config.Load("x.yaml", config.Text(src), config.AllProblems(ps))
	if err != nil || cfg == nil || len(cfg.Locations) != 1 {
		t.Fatalf("AllProblems: config %v, err %v; want the decoded config", cfg, err)
	}
	if ps.File != "x.yaml" || len(ps.List) != 2 || ps.List[0].Line != 1 || ps.List[1].Line != 2 {
		t.Errorf("AllProblems: problems %+v in %q, want lines 1 and 2 of x.yaml", ps.List, ps.File)
	}
	if cfg, err := config.Load("x.yaml", config.Text(src)); cfg != nil || !config.IsProblems(err) {
		t.Errorf("without AllProblems: config %v, err %v; want no config and the problems", cfg, err)
	}
	ps = &config.Problems{}
	if cfg, err := config.Load("x.yaml", config.Text("locations: [\n"), config.AllProblems(ps)); cfg != nil || err != nil || ps.Err() == nil {
		t.Errorf("not YAML: config %v, err %v, problems %v; want only problems", cfg, err, ps.Err())
	}
	ps = &config.Problems{}
	_, err = config.Load(filepath.Join(t.TempDir(), "missing.yaml"), config.AllProblems(ps))
	if err == nil || config.IsProblems(err) || len(ps.List) != 0 {
		t.Errorf("missing file: err %v, problems %v; want the file's error alone", err, ps.List)
	}
}

func TestCheckListenSyntax(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080":  "",
		"[::1]:0":         "",
		":65535":          "",
		"hub.local:1883":  "",
		"127.0.0.1:65536": "port 65536 is out of range (0 to 65535)",
		"127.0.0.1:-1":    `port "-1" is not a number`,
		"127.0.0.1:http":  `port "http" is not a number`,
		"127.0.0.1":       "is not host:port",
		"127.0.0.1:":      "has no port",
		"::1:80":          "is not host:port",
	} {
		err := config.CheckListenSyntax(addr)
		if (err == nil) != (want == "") || (err != nil && err.Error() != want) {
			t.Errorf("%s: %v, want %q", addr, err, want)
		}
	}
}

func TestServerLimits(t *testing.T) {
	base := "locations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"
	for src, want := range map[string]string{
		"server: {max_connections: 10, memory_limit: 64MiB}": "10 64MiB",
		"server: {memory_limit: off}":                        "256 off",
		"server: {memory_limit: 1GiB}":                       "256 1GiB",
		"server: {memory_limit: 100000000}":                  "256 100000000B",
		"server: {memory_limit: 16MiB}":                      `x.yaml:1: server.memory_limit must be at least 32MiB (or off), not 16MiB`,
		"server: {max_connections: 70000}":                   `x.yaml:1: server.max_connections must be between 1 and 65536, not 70000`,
		"server: {memory_limit: 9999999999TiB}":              `x.yaml:1: "9999999999TiB" is not a size`,
	} {
		cfg, err := config.Load("x.yaml", config.Text(src+"\n"+base))
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = fmt.Sprintf("%d %s", cfg.Server.MaxConnections, cfg.Server.MemoryLimit)
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s: %s, want %s", src, got, want)
		}
	}
}

// Top-level keys that are not the config's own are kept raw, with their
// lines, for the drivers (which decide whether one is theirs); the
// config's own keys are decoded and checked as before, around them.
func TestSectionsKeptRaw(t *testing.T) {
	cfg, err := config.Load("x.yaml", config.Text(`relays:
  board: hat
server: {listen: 127.0.0.1:9}
mqtt: {broker: embedded}
locations:
  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Listen != "127.0.0.1:9" {
		t.Errorf("server.listen = %q", cfg.Server.Listen)
	}
	if len(cfg.Sections) != 2 {
		t.Errorf("sections = %v, want relays and mqtt", cfg.Sections)
	}
	r := cfg.Sections["relays"]
	if r.Key == nil || r.Key.Line != 1 || r.Value.Line != 2 || config.Lookup(r.Value, "board").Value != "hat" {
		t.Errorf("relays = %+v, want key at line 1, its mapping at line 2", r)
	}
	if m := cfg.Sections["mqtt"]; m.Key == nil || m.Key.Line != 4 || config.Lookup(m.Value, "broker").Value != "embedded" {
		t.Errorf("mqtt = %+v", m)
	}
	if got := strings.Join(config.Keys(), ","); got != "audit,data_dir,demo,locations,log,oauth,platform,server,storage,webhooks" {
		t.Errorf("Keys() = %s", got)
	}
	// A misspelt key of the config's own is still the config's to report.
	if _, err := config.Load("x.yaml", config.Text("server: {lissen: x}\nlocations: [{id: 1, name: H}]\n")); err == nil || !strings.Contains(err.Error(), `unknown key "lissen" in server`) {
		t.Errorf("nested unknown key: %v", err)
	}
}

// TestWebhooksAllow: webhooks.allow takes public, host names, addresses
// and CIDR prefixes, and names the line of anything else with what is
// wrong with it.
func TestWebhooksAllow(t *testing.T) {
	base := "locations: [{id: 1, name: H}]\n"
	cfg, err := config.Load("w.yaml", config.Text(base+"webhooks:\n  allow: [public, 192.168.1.0/24, nodered.lan, \"::1\", 10.0.0.7, fd00::/8, node_red.home.arpa]\n"))
	if err != nil || len(cfg.Webhooks.Allow) != 7 {
		t.Fatalf("a good allow list: %v %+v", err, cfg)
	}
	for bad, want := range map[string]string{
		`"a b"`:                                 "is not public, an IP address, a CIDR prefix or a host name",
		`""`:                                    "is empty",
		`"http://x"`:                            "is a URL or a path",
		`1.2.3.4/33`:                            "is not a CIDR prefix",
		`"u@h"`:                                 "has user information",
		`"*.lan"`:                               "has a wildcard",
		`nodered.lan:1880`:                      "has a port",
		`"[::1]:80"`:                            "has a port",
		`192.168.1.0/24/8`:                      "is not a CIDR prefix",
		`"nodered..lan"`:                        "is not public, an IP address",
		`"` + strings.Repeat("a", 64) + `.lan"`: "is not public, an IP address",
	} {
		_, err := config.Load("w.yaml", config.Text(base+"webhooks:\n  allow: ["+bad+"]\n"))
		if err == nil || !strings.Contains(err.Error(), "w.yaml:3: webhooks.allow") || !strings.Contains(err.Error(), want) {
			t.Errorf("allow [%s]: %v, want the problem on line 3 saying %q", bad, err, want)
		}
	}
}
