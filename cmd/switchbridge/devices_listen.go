package main

// devices listen: opens the embedded broker's onboarding login for a while,
// so that a device not yet adopted can log in to announce itself.

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/hub/adopt"
	"github.com/switchbridge/switchbridge/drivers/mqtt"
)

// onboardingAdmin is what the owner's commands do with the onboarding
// window; the running hub's broker reads it at each onboarding login.
type onboardingAdmin interface {
	OpenMQTTOnboarding(ctx context.Context, hash []byte, opened, expires time.Time) error
	CloseMQTTOnboarding(ctx context.Context, now time.Time) (bool, error)
	MQTTOnboarding(ctx context.Context) (*bridge.MQTTOnboarding, error)
}

func devicesListen(fs *flag.FlagSet) func(*invocation) error {
	open := fs.Duration("for", 10*time.Minute, "how long the onboarding login stays open (at most 24h)")
	off := fs.Bool("off", false, "close the onboarding login now")
	return func(c *invocation) error {
		set, err := mqtt.ReadSettings(c.cfg)
		if err != nil {
			return err
		}
		switch {
		case set.Broker != mqtt.Embedded:
			fmt.Fprintf(c.stdout, "the broker is your own (%s): the hub only listens there, and lists what announces itself (switchbridge devices); a device logs in with a login of your broker. Nothing to open.\n", config.RedactURL(set.Broker))
			return nil
		case len(set.Users) == 0:
			fmt.Fprintf(c.stdout, "the embedded broker has no mqtt.users: any client on %s may connect and announce itself already. Nothing to open.\n", set.Listen)
			return nil
		}
		now := time.Now()
		if *off {
			was, err := c.store.CloseMQTTOnboarding(c.ctx, now)
			if err != nil {
				return err
			}
			if was {
				fmt.Fprintln(c.stdout, "onboarding closed: the login "+mqtt.OnboardingLogin+" is refused, and its clients are disconnected within seconds")
			} else {
				fmt.Fprintln(c.stdout, "onboarding was not open")
			}
			return nil
		}
		if *open < time.Minute || *open > mqtt.MaxOnboarding {
			return fmt.Errorf("--for %s: give between 1m and %s", *open, mqtt.MaxOnboarding)
		}
		password := adopt.NewPassword()
		until := now.Add(*open)
		if err := c.store.OpenMQTTOnboarding(c.ctx, mqtt.OnboardingHash(password), now, until); err != nil {
			return err
		}
		writeOnboarding(c, set, password, until)
		return nil
	}
}

// writeOnboarding says what the owner types on a new device to have it
// announce itself while the onboarding login is open.
func writeOnboarding(c *invocation, set mqtt.Settings, password string, until time.Time) {
	st := set.SetupFor(config.Switch{}, publicHost(c.cfg), false)
	w := func(format string, args ...any) { fmt.Fprintf(c.stdout, format+"\n", args...) }
	w("onboarding open until %s: a device not yet adopted may log in to announce itself (a new password at each listen;", until.UTC().Format(time.RFC3339))
	w("it may publish only its announcement and its last will, and receives no command)")
	w("")
	w("  broker    %s:%s", st.Host, st.Port)
	w("  login     %s", mqtt.OnboardingLogin)
	w("  password  %s   (shown only now)", password)
	w("")
	w("Tasmota, in the web page's Tools > Console (its native discovery, SetOption19 0, is the default):")
	w("  Backlog MqttHost %s; MqttPort %s; MqttUser %s; MqttPassword %s", st.Host, st.Port, mqtt.OnboardingLogin, password)
	w("Shelly Gen1: Internet & Security > Advanced - Developer Settings: Server %s:%s, Username and Password as above", st.Host, st.Port)
	w("Shelly Gen2 and later: Settings > MQTT: Server %s:%s, Username and Password as above", st.Host, st.Port)
	w("ESPHome, Zigbee2MQTT: the same server, username and password in its mqtt: settings")
	if st.Note != "" {
		w("")
		w("Note: %s.", st.Note)
	}
	w("")
	w("then: switchbridge devices lists it; switchbridge devices adopt ID --location N gives it a login of its own,")
	w("and switchbridge devices setup SWITCH_ID what to set on it. switchbridge devices listen --off closes onboarding now.")
}
