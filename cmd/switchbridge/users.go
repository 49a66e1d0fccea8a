package main

// The user commands: add, list, passwd, delete and locations. Deleting a
// user or removing them from a location moves the store's access
// generation in the same transaction, so a running hub stops honouring
// their tokens at its next request, without a restart or a signal.

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/term"

	"github.com/switchbridge/switchbridge/bridge/config"
)

func userAdd(fs *flag.FlagSet) func(*invocation) error {
	var locs locationIDs
	fs.Var(&locs, "location", "a location `ID` the user belongs to (repeatable)")
	return func(c *invocation) error {
		name := c.args[0]
		if err := validName(name); err != nil {
			return err
		}
		ctx, cfg, db := c.ctx, c.cfg, c.db
		for _, l := range locs {
			if hasLocation(cfg, l) {
				continue
			}
			// A location one of the platform's hubs holds.
			if _, err := db.HubLocation(ctx, l); err != nil {
				return fmt.Errorf("location %d is not in %s, nor held by a hub: %w", l, cfg.File, err)
			}
		}
		hash, err := c.newPasswordHash("Password for " + name)
		if err != nil {
			return err
		}
		if _, err := db.CreateUser(ctx, name, hash, locs); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "user %s added\n", name)
		return nil
	}
}

func validName(name string) error {
	if name == "" || len(name) > 64 || strings.ContainsAny(name, " \t\r\n") {
		return usageErr("user name %q must be 1-64 characters without spaces", name)
	}
	return nil
}

func hasLocation(cfg *config.Config, id int64) bool {
	for _, l := range cfg.Locations {
		if l.ID == id {
			return true
		}
	}
	return false
}

// newPasswordHash reads a new password: prompted twice without echo on a terminal,
// else the first line of stdin. It returns the bcrypt hash.
func (c *invocation) newPasswordHash(prompt string) ([]byte, error) {
	var pw string
	if f, ok := c.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(c.stderr, prompt+": ")
		a, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(c.stderr)
		if err != nil {
			return nil, err
		}
		fmt.Fprint(c.stderr, "Again: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(c.stderr)
		if err != nil {
			return nil, err
		}
		if string(a) != string(b) {
			return nil, errors.New("the passwords differ")
		}
		pw = string(a)
	} else {
		line, err := bufio.NewReader(io.LimitReader(c.stdin, 4096)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading the password from stdin: %w", err)
		}
		pw = strings.TrimRight(line, "\r\n")
	}
	switch {
	case len(pw) < 4:
		return nil, errors.New("the password must be at least 4 characters")
	case len(pw) > 72:
		return nil, errors.New("the password must be at most 72 bytes (a bcrypt limit)")
	}
	return bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
}

func userList(c *invocation) error {
	users, err := c.db.Users(c.ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLOCATIONS")
	for _, u := range users {
		fmt.Fprintf(tw, "%s\t%s\n", u.Name, joinIDs(u.Locations))
	}
	return tw.Flush()
}

func userPasswd(c *invocation) error {
	ctx, db, arg := c.ctx, c.db, c.args[0]
	if _, err := db.UserByName(ctx, arg); err != nil {
		return err
	}
	hash, err := c.newPasswordHash("New password for " + arg)
	if err != nil {
		return err
	}
	if err := db.SetPassword(ctx, arg, hash); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "password of %s changed\n", arg)
	return nil
}

func userDelete(c *invocation) error {
	ctx, db, arg := c.ctx, c.db, c.args[0]
	u, err := db.UserByName(ctx, arg)
	if err != nil {
		return err
	}
	ins, err := db.InstallationsOf(ctx, u.ID)
	if err != nil {
		return err
	}
	if err := db.DeleteUser(ctx, arg); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "user %s deleted; %s uninstalled, their tokens no longer work (a login in progress ends at its next page)\n",
		arg, plural(len(ins), "installation"))
	return nil
}

func userLocations(fs *flag.FlagSet) func(*invocation) error {
	var add, remove locationIDs
	fs.Var(&add, "add", "a location `ID` to add the user to (repeatable)")
	fs.Var(&remove, "remove", "a location `ID` to remove the user from, uninstalling what they installed there (repeatable)")
	return func(c *invocation) error { return c.userLocations(add, remove) }
}

func (c *invocation) userLocations(add, remove locationIDs) error {
	ctx, cfg, db, arg := c.ctx, c.cfg, c.db, c.args[0]
	dir, err := locationsOf(cfg, db)
	if err != nil {
		return err
	}
	for _, l := range add {
		if _, ok := dir.Location(l); !ok {
			return fmt.Errorf("location %d is neither in %s nor held by a hub of this platform", l, cfg.File)
		}
	}
	name := arg
	if _, err := db.UserByName(ctx, name); err != nil {
		return err
	}
	// Removals first: --remove 1 --add 1 ends what was installed there and
	// leaves the membership, which is what "start over" means.
	for _, l := range remove {
		n, err := db.RemoveUserLocation(ctx, name, l)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "user %s removed from location %s; %s there uninstalled\n", name, locationLabel(dir, l), plural(n, "installation"))
	}
	for _, l := range add {
		if err := db.AddUserLocation(ctx, name, l); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "user %s added to location %s\n", name, locationLabel(dir, l))
	}
	u, err := db.UserByName(ctx, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "user %s belongs to: %s\n", name, orNone(joinIDs(u.Locations)))
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "no location"
	}
	return s
}
