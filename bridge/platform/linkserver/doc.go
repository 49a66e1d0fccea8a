// Package linkserver is the platform's side of the link to its hubs: it
// authenticates hubs, takes their inventories, answers their snapshots and
// long polls from the change log, records their usage reports, and shows
// consent, discovery and the install rules the locations they hold
// (Directory). The protocol itself is bridge/link's; a hub's side is
// bridge/hub/replica.
//
// The name says which side of the link this is, the server's, rather than
// whom it serves: "hub" already names the role that drives switches, and a
// "hubserver" would read as a hub's own server.
package linkserver
