// Package replica is a hub's side of the link to its platform: it reports
// the hub's inventory, follows the platform's changes into the replica of
// what the hub's installations need (Follower), reports when their tokens
// were last used, and checks tokens from the replica (Authorizer), so the
// hub keeps serving while its platform is away. The protocol is
// bridge/link's; the platform's side is bridge/platform/linkserver.
package replica
