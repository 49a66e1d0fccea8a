package link

// When installations were last used at a hub, for the platform's connected
// apps page and `installation list`: the hub answers API requests from its
// replica, so only it knows.

// UsagePath is where a hub reports when its installations were last used.
const UsagePath = "/api/hub/v1/usage"

// MaxUsageEntries bounds one usage report, and what a hub keeps of uses
// not yet reported while its platform is away.
const MaxUsageEntries = 10000

// Usage is a hub's usage report: per installation id, when one of its
// tokens was last accepted, in Unix seconds.
type Usage struct {
	Used map[string]int64 `json:"used"`
}
