package main

// The embedded MQTT broker's client ids: which login each belongs to, and
// freeing one for another login.

import (
	"flag"
	"fmt"
	"text/tabwriter"
	"time"
)

func mqttClientIDs(*flag.FlagSet) func(*invocation) error {
	return func(c *invocation) error {
		ids, err := c.store.MQTTClientIDs(c.ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLIENT_ID\tLOGIN\tBOUND\tLAST_USED")
		for _, id := range ids {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", id.ID, id.Login, id.Bound.UTC().Format(time.RFC3339), id.LastUsed.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	}
}

func mqttReleaseClientID(*flag.FlagSet) func(*invocation) error {
	return func(c *invocation) error {
		was, err := c.store.ReleaseMQTTClientID(c.ctx, c.args[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "released client id %s (it was login %s's); the next login to connect with it keeps it\n", was.ID, was.Login)
		return nil
	}
}
