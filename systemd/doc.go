// Package systemd holds the hub's systemd unit and sysusers snippet, with
// tests that check them using systemd's own tools; it has no Go code to
// import.
package systemd
