package config_test

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge/config"
)

// Every key SwitchKeys lists is kept out of a switch's Options, and no
// other key is: the list drivers and MQTT profiles are checked against is
// the one the config applies.
func TestSwitchKeys(t *testing.T) {
	keys := config.SwitchKeys()
	var b strings.Builder
	b.WriteString("locations: [{id: 1, name: Home, switches: [{")
	for _, k := range keys {
		v := "x"
		switch k {
		case "max_changes":
			v = "off"
		case "confirm":
			v = "true"
		}
		b.WriteString(k + ": " + v + ", ")
	}
	b.WriteString("own: 1}]}]\n")
	cfg, err := config.Load("x.yaml", config.Text(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Locations[0].Switches[0].Confirm {
		t.Error("confirm: true did not make the switch one to confirm")
	}
	opts := cfg.Locations[0].Switches[0].Options
	if len(opts.Content) != 2 || opts.Content[0].Value != "own" {
		var got []string
		for i := 0; i < len(opts.Content); i += 2 {
			got = append(got, opts.Content[i].Value)
		}
		t.Errorf("a switch's driver keys are %v, want [own]: SwitchKeys %v is not what the config keeps for itself", got, keys)
	}
}

// An unknown key in a driver's section names the section, as one in the
// config's own sections does.
func TestDecodeSection(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("broker: x\nbrokr: y\ntls: {ca: z, cert_fil: w}\n"), &doc); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Broker string `yaml:"broker"`
		TLS    struct {
			CA   string `yaml:"ca"`
			Cert string `yaml:"cert_file"`
		} `yaml:"tls"`
	}
	err := config.DecodeSection(doc.Content[0], "relayhat", &s)
	for _, want := range []string{`2: unknown key "brokr" in relayhat (known: broker, tls)`, `3: unknown key "cert_fil" in relayhat.tls`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
}
