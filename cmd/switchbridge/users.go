package main

// The user commands: add, list, passwd, owner, delete and locations.
// Deleting a user or removing them from a location moves the store's
// access generation in the same transaction, so a running hub stops
// honouring their tokens at its next request, without a restart or a
// signal. Making a user an owner or not moves nothing: no token's grant
// changes.

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"

	"github.com/switchbridge/switchbridge/bridge/platform/admin"
)

func userAdd(fs *flag.FlagSet) func(*invocation) error {
	var locs locationIDs
	fs.Var(&locs, "location", "a location `ID` the user belongs to (repeatable)")
	owner := fs.Bool("owner", false, "make the user an owner, who may use the console (the owner's web pages) too")
	return func(c *invocation) error {
		name := c.args[0]
		// Checked before the password is asked for.
		if err := admin.CheckUserName(name); err != nil {
			return err
		}
		if err := c.admin.CheckLocations(locs); err != nil {
			return err
		}
		pw, err := c.readPassword("Password for " + name)
		if err != nil {
			return err
		}
		if _, err := c.admin.AddUser(c.ctx, name, pw, locs, *owner); err != nil {
			return err
		}
		if *owner {
			fmt.Fprintf(c.stdout, "user %s added as an owner\n", name)
		} else {
			fmt.Fprintf(c.stdout, "user %s added\n", name)
		}
		return nil
	}
}

// readPassword reads a new password: prompted twice without echo on a
// terminal, else the first line of stdin.
func (c *invocation) readPassword(prompt string) (string, error) {
	f, ok := c.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		line, err := bufio.NewReader(io.LimitReader(c.stdin, 4096)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("reading the password from stdin: %w", err)
		}
		return strings.TrimRight(line, "\r\n"), nil
	}
	fmt.Fprint(c.stderr, prompt+": ")
	a, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(c.stderr)
	if err != nil {
		return "", err
	}
	fmt.Fprint(c.stderr, "Again: ")
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(c.stderr)
	if err != nil {
		return "", err
	}
	if string(a) != string(b) {
		return "", errors.New("the passwords differ")
	}
	return string(a), nil
}

func userList(c *invocation) error {
	users, err := c.store.Users(c.ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLOCATIONS\tOWNER")
	for _, u := range users {
		fmt.Fprintf(tw, "%s\t%s\t%v\n", u.Name, joinIDs(u.Locations), u.Owner)
	}
	return tw.Flush()
}

func userPasswd(c *invocation) error {
	name := c.args[0]
	if _, err := c.store.UserByName(c.ctx, name); err != nil {
		return err
	}
	pw, err := c.readPassword("New password for " + name)
	if err != nil {
		return err
	}
	if err := c.admin.SetPassword(c.ctx, name, pw); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "password of %s changed\n", name)
	return nil
}

func userOwner(c *invocation) error {
	name, mode := c.args[0], c.args[1]
	if mode != "on" && mode != "off" {
		return usageErr("user owner takes on or off, not %q", mode)
	}
	if err := c.admin.SetOwner(c.ctx, name, mode == "on"); err != nil {
		return err
	}
	if mode == "on" {
		fmt.Fprintf(c.stdout, "user %s is an owner: they may use the console\n", name)
	} else {
		fmt.Fprintf(c.stdout, "user %s is no owner: they only install apps\n", name)
	}
	return nil
}

func userDelete(c *invocation) error {
	n, err := c.admin.DeleteUser(c.ctx, c.args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "user %s deleted; %s uninstalled, their tokens no longer work (a login in progress ends at its next page)\n",
		c.args[0], plural(n, "installation"))
	return nil
}

func userLocations(fs *flag.FlagSet) func(*invocation) error {
	var add, remove locationIDs
	fs.Var(&add, "add", "a location `ID` to add the user to (repeatable)")
	fs.Var(&remove, "remove", "a location `ID` to remove the user from, uninstalling what they installed there (repeatable)")
	return func(c *invocation) error {
		name := c.args[0]
		done, err := c.admin.ChangeLocations(c.ctx, name, add, remove)
		for _, d := range done {
			if d.Added {
				fmt.Fprintf(c.stdout, "user %s added to location %s\n", name, locationLabel(c.locations, d.Location))
			} else {
				fmt.Fprintf(c.stdout, "user %s removed from location %s; %s there uninstalled\n", name, locationLabel(c.locations, d.Location), plural(d.Uninstalled, "installation"))
			}
		}
		if err != nil {
			return err
		}
		u, err := c.store.UserByName(c.ctx, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "user %s belongs to: %s\n", name, orNone(joinIDs(u.Locations)))
		return nil
	}
}

func orNone(s string) string {
	if s == "" {
		return "no location"
	}
	return s
}
