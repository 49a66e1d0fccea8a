package main

// The user commands: add, list, passwd, delete and locations. Deleting a
// user or removing them from a location moves the store's access
// generation in the same transaction, so a running hub stops honouring
// their tokens at its next request, without a restart or a signal.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/term"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
)

func (c *cli) userAdd(ctx context.Context, args []string) error {
	f := newFlags("user add")
	var locs locationIDs
	f.Var(&locs, "location", "location id the user belongs to (repeatable)")
	arg, err := f.parseOne(args, "one NAME")
	if err != nil {
		return err
	}
	if len(locs) == 0 {
		return usageErr("user add needs at least one --location ID")
	}
	name := arg
	if err := validName(name); err != nil {
		return err
	}
	cfg, db, err := openConfigStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, l := range locs {
		if hasLocation(cfg, l) {
			continue
		}
		// A location one of the platform's hubs holds.
		if _, err := db.HubLocation(ctx, l); err != nil {
			return fmt.Errorf("location %d is not in %s, nor held by a hub: %s", l, cfg.File, bridge.ErrorMessage(err))
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
func (c *cli) newPasswordHash(prompt string) ([]byte, error) {
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

func (c *cli) userList(ctx context.Context, args []string) error {
	f := newFlags("user list")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("user list takes no arguments")
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	users, err := db.Users(ctx)
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

func (c *cli) userPasswd(ctx context.Context, args []string) error {
	f := newFlags("user passwd")
	arg, err := f.parseOne(args, "one NAME")
	if err != nil {
		return err
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.UserByName(ctx, arg); err != nil {
		return errors.New(bridge.ErrorMessage(err))
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

func (c *cli) userDelete(ctx context.Context, args []string) error {
	f := newFlags("user delete")
	arg, err := f.parseOne(args, "one NAME")
	if err != nil {
		return err
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	u, err := db.UserByName(ctx, arg)
	if err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	ins, err := db.InstallationsOf(ctx, u.ID)
	if err != nil {
		return err
	}
	if err := db.DeleteUser(ctx, arg); err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	fmt.Fprintf(c.stdout, "user %s deleted; %s uninstalled, their tokens no longer work (a login in progress ends at its next page)\n",
		arg, plural(len(ins), "installation"))
	return nil
}

func (c *cli) userLocations(ctx context.Context, args []string) error {
	f := newFlags("user locations")
	var add, remove locationIDs
	f.Var(&add, "add", "a location id to add the user to (repeatable)")
	f.Var(&remove, "remove", "a location id to remove the user from, uninstalling what they installed there (repeatable)")
	arg, err := f.parseOne(args, "one NAME")
	if err != nil {
		return err
	}
	cfg, db, err := openConfigStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
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
		return errors.New(bridge.ErrorMessage(err))
	}
	// Removals first: --remove 1 --add 1 ends what was installed there and
	// leaves the membership, which is what "start over" means.
	for _, l := range remove {
		n, err := db.RemoveUserLocation(ctx, name, l)
		if err != nil {
			return errors.New(bridge.ErrorMessage(err))
		}
		fmt.Fprintf(c.stdout, "user %s removed from location %s; %s there uninstalled\n", name, locationLabel(dir, l), plural(n, "installation"))
	}
	for _, l := range add {
		if err := db.AddUserLocation(ctx, name, l); err != nil {
			return errors.New(bridge.ErrorMessage(err))
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
