package mqtt

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
)

// profilePlug is the plug of a registered profile's switch "plug", made
// from its simulator's keys (contract_test.go).
func profilePlug(t testing.TB, name string) *plug {
	t.Helper()
	sim, ok := simulators[name]
	if !ok {
		t.Fatalf("profile %s has no simulator (see TestProfilesHaveSimulators)", name)
	}
	p, err := buildPlug(drivers.Spec{ID: "plug", Options: mustNode(t, "{profile: "+name+", "+sim.keys+"}")})
	if err != nil {
		t.Fatalf("profile %s with its simulator's keys: %v", name, err)
	}
	return p
}

// TestProfileKeys: no registered profile takes a key a switch keeps for
// itself, and one that does is refused with a message that says so.
func TestProfileKeys(t *testing.T) {
	if err := checkProfiles(profiles); err != nil {
		t.Fatal(err)
	}
	bad := append(slices.Clone(profiles), profile{"clash", func() firmware { return new(clashFirmware) }}, profiles[0])
	err := checkProfiles(bad)
	for _, want := range []string{
		`mqtt profile clash: its key "name" is a switch's own key (confirm, driver, id, max_changes, name, profile are the switch's): give the option another name`,
		`mqtt profile ` + profiles[0].name + ` is registered twice`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	// The driver is not made while such a profile is registered. (No test
	// of this package runs in parallel with this one: t.Parallel tests
	// wait for the sequential ones.)
	registered := profiles
	profiles = bad
	_, err = New(testEnv(t, "broker: tcp://127.0.0.1:1"))
	profiles = registered
	if err == nil || !strings.Contains(err.Error(), `mqtt profile clash: its key "name"`) {
		t.Errorf("New with a profile taking name: %v", err)
	}
	for _, k := range config.SwitchKeys() {
		if ofAnyProfile(k) {
			t.Errorf("a registered profile takes %q", k)
		}
	}
}

// clashFirmware is a profile whose option is called name, as a switch's
// own name is.
type clashFirmware struct {
	Topic string `yaml:"topic"`
	Name  string `yaml:"name"`
}

func (clashFirmware) plug(c *checker) *plug { return &plug{} }

// TestProfilesHaveBrokerRules: every registered profile gives the embedded
// broker rules under which its commands are the hub's alone, and its
// state its login's alone, while that login may still hear its commands
// and report. A profile without topic rules (plugACL) fails here.
func TestProfilesHaveBrokerRules(t *testing.T) {
	const hubClient = "the-hub"
	for _, prof := range profiles {
		t.Run(prof.name, func(t *testing.T) {
			p := profilePlug(t, prof.name)
			other, err := buildPlug(drivers.Spec{ID: "other", Options: mustNode(t, "{profile: generic, state_topic: elsewhere/state, command_topic: elsewhere/set}")})
			if err != nil {
				t.Fatal(err)
			}
			logins := map[string]Login{
				"own":   {Switches: []string{"plug"}},
				"other": {Switches: []string{"other"}},
				"loose": {}, // a password-only login
			}
			rules := newBrokerRules(HubLogin, hubClient, logins, map[string]*plug{"plug": p, "other": other})

			var commands []string
			if p.command != nil {
				commands = append(commands, p.command(bridge.On).topic, p.command(bridge.Off).topic)
			}
			if p.query != nil {
				commands = append(commands, p.query.topic)
			}
			state := slices.Sorted(maps.Keys(p.routes))
			if p.requests != nil {
				src := replySource(hubClient, "plug")
				for _, v := range []bridge.Value{bridge.On, bridge.Off, ""} {
					commands = append(commands, p.requests.request(1, src, v).topic)
				}
				state = append(state, p.requests.replyTopic(src))
			}
			slices.Sort(commands)
			commands = slices.Compact(commands)
			if len(commands) == 0 || len(state) == 0 {
				t.Fatalf("the plug has commands %v and state topics %v: the simulator's switch must be commandable and report", commands, state)
			}
			for _, topic := range commands {
				if !rules.mayPublish(HubLogin, topic) {
					t.Errorf("the hub may not publish its command on %s", topic)
				}
				for _, login := range []string{"own", "other", "loose"} {
					if rules.mayPublish(login, topic) {
						t.Errorf("login %s may publish the command on %s: only the hub may (its plugACL.commands must cover it)", login, topic)
					}
				}
				if !rules.mayRead("own", topic) {
					t.Errorf("the plug's own login may not subscribe to its command topic %s (plugACL.subscribe)", topic)
				}
			}
			for _, topic := range state {
				if !rules.mayPublish("own", topic) {
					t.Errorf("the plug's own login may not report on %s", topic)
				}
				for _, login := range []string{"other", "loose"} {
					if rules.mayPublish(login, topic) {
						t.Errorf("login %s may publish the plug's state on %s", login, topic)
					}
				}
			}
		})
	}
}

// TestProfilesDocumented: the README's two profile tables (a switch's keys,
// and the broker's rules) each have a row for every registered profile and
// none for another.
func TestProfilesDocumented(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for _, header := range []string{
		"| profile | keys | topics used |",
		"| profile | commands (only the hub publishes) | the login's namespace |",
	} {
		i := slices.Index(lines, header)
		if i < 0 {
			t.Errorf("README.md has no table %s", header)
			continue
		}
		var documented []string
		for _, l := range lines[i+2:] {
			if !strings.HasPrefix(l, "| `") {
				break
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "| `"), "`")
			documented = append(documented, name)
		}
		for _, p := range profiles {
			if !slices.Contains(documented, p.name) {
				t.Errorf("profile %s has no row in README.md's table %s", p.name, header)
			}
		}
		for _, name := range documented {
			if _, ok := lookupProfile(name); !ok {
				t.Errorf("README.md's table %s has a row for %s, which is not a registered profile", header, name)
			}
		}
	}
}
