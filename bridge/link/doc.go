// Package link is the wire protocol between a platform and its hubs, and
// nothing else: its paths and headers, the bodies both sides send
// (Inventory, Usage) with their limits, the timing both count on, and how
// a body is read. One switchbridge is the platform ({auth_url}: users,
// apps, OAuth, consent, installations, tokens, discovery and a registry of
// hubs) and any number of switchbridge hubs are its servers (drivers,
// locations and switches, and the installation API for the installations
// in their locations, at their own base_url). The platform's side of the
// link is bridge/platform/linkserver, a hub's is bridge/hub/replica; this
// package imports neither.
//
// # The protocol
//
// The hub connects out to the platform (it may sit behind NAT; the
// platform never dials a hub), over HTTP(S) on the platform's own
// listener, and authenticates every request with HTTP Basic: its hub id and
// the secret `switchbridge hub add` printed once (the platform keeps its
// SHA-256 only and compares in constant time; failures are throttled per
// hub id and client address, behind server.trusted_proxies). All bodies are JSON, one value each
// (trailing data is an error), bounded, and read by a tolerant reader:
// fields a side does not know are ignored, so a platform and its hubs can
// be upgraded one at a time. A change an older side could not ignore
// would take a new path (/api/hub/v2).
//
//	PUT /api/hub/v1/inventory        the hub's version and locations, each with
//	                                 its switches (id, name, supported commands):
//	                                 at connect and after every reload.
//	                                 204; 409 when another hub (or the platform
//	                                 itself) holds one of the locations, with the
//	                                 reason; 400 for an inventory past the limits.
//	GET /api/hub/v1/snapshot         every installation in the hub's locations
//	                                 (id, client id, user id, location, granted
//	                                 switches, whether the user still belongs)
//	                                 and the SHA-256 hashes and expiries of their
//	                                 live tokens, with the cursor they are current
//	                                 at.
//	GET /api/hub/v1/changes?cursor=N&tag=T
//	                                 a long poll: what changed for the hub's
//	                                 locations after N, as current records
//	                                 (upserts) and tombstones, with the new
//	                                 cursor and its tag. It answers at once when
//	                                 there are such changes, else after
//	                                 DefaultPollTimeout with none (and a cursor
//	                                 moved past changes that were not the
//	                                 hub's). N is also the hub's acknowledgement:
//	                                 `hub list` shows the lag. 410 Gone when the
//	                                 log cannot resume from N: older than the
//	                                 platform's change log keeps, or not the
//	                                 entry the tag names (a platform restored
//	                                 from a backup); the hub fetches a snapshot
//	                                 and goes on from there.
//
//	GET /api/hub/v1/changes?cursor=N&tag=T&wait=0
//	                                 the same without waiting: on a replica
//	                                 miss (an installation or a token hash the
//	                                 replica lacks, e.g. a token issued a moment
//	                                 ago) the hub syncs at once and checks again;
//	                                 only while the link is up, one at a time, at
//	                                 most one per 200 ms (Follower.SyncNow in
//	                                 bridge/hub/replica).
//
//	PUT /api/hub/v1/usage            when the hub last accepted a token of each
//	                                 installation (Usage), for the platform's
//	                                 connected apps page: at most once a minute
//	                                 per installation, and what could not be sent
//	                                 once the link is back. 204; the platform
//	                                 records only installations in the hub's
//	                                 locations.
//
// Every call carries the hub process's instance id (InstanceHeader): while
// one instance holds a hub's link, another is refused 409 and the platform
// records it (hub list). Every answer names the locations the platform
// accepts from the hub (LocationsHeader); the hub serves no installation of
// any other. A long poll that asks for it (HeartbeatHeader) gets an interim
// 102 Processing as soon as the platform accepts it and every
// HeartbeatInterval while it waits, so the hub tells a dead connection from
// a quiet one within seconds and measures its round trip by the first (the
// platform's inventory answer says "at-once" in HeartbeatHeader); one hub
// holds at most linkserver.MaxPollsPerHub polls, a newer one ending the
// oldest with no changes. A platform shutting down ends its polls with 503
// and Retry-After: 1, and the hub calls again within a second. A hub's
// inventory carries its replica cursor (CursorHeader): a platform that
// refuses the hub's credentials and never held that cursor (restored from
// a backup older than the hub's secret) answers 401 with RekeyHeader, and
// the hub empties its replica until it has new credentials.
//
// A batch may name Locations the hub (re)gained: it carries their whole
// state, and the hub drops what it held of them first. A hub drops a
// location's replica itself when it gives the location up (before it
// reports the inventory), so its replica holds exactly the installations
// of the locations it holds. A removed hub (hub remove) is answered 410
// with the RemovedHeader on every call, and its long poll ends at once: it
// empties its replica. A wrong or rotated secret is 401, and the hub keeps
// serving what it knows.
//
// This is Kubernetes' list + watch with a resourceVersion, and tailscale's
// long-polling control client: the cursor is the platform's change
// sequence, with the tag of the entry there (a digest of it). A platform
// restored from a backup goes on from the backup's sequence with other
// entries; the tag tells a cursor a hub took past the backup from one
// the restored log holds, where the sequence alone would let the hub skip
// whatever changed between the backup and its cursor (a revocation, an
// uninstall). The hub stores each batch and its new cursor in one SQLite
// transaction, so after any break (a kill -9 of either side, a network
// outage) it resumes where it was: nothing missed, nothing applied twice
// (records are whole, so applying one again changes nothing).
//
// The platform's change log is filled by SQLite triggers on the
// installations, tokens and memberships tables (migration 0008), so every
// writer is covered, in any process: consent, the CLI, a revocation, an
// uninstall, the removal of an app, a user or a membership. A change made
// by another process wakes the long polls within linkserver's
// WakeInterval. Expiry needs no change: a hub compares expiry times
// itself.
//
// A hub learns nothing that lets it mint a token or use another hub's:
// only hashes, only for its own locations. It answers every API request
// from its replica, so it keeps serving what it knows while the platform
// is away, and says so (log, switchbridge_platform_link_up,
// switchbridge_platform_replica_age_seconds). It reconnects with
// exponential back-off, reset after any answered poll.
package link
