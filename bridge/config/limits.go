package config

// Rate limits: server.rate_limit per installation and max_changes per
// switch.

import (
	"fmt"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults and bounds of the rate limits.
const (
	DefaultRateRequests = 250 // the original platform's: 250 in 60 seconds
	DefaultRatePer      = 60 * time.Second
	maxRateRequests     = 1_000_000
	minRatePer          = time.Second
	maxRatePer          = 24 * time.Hour
	maxChangeBurst      = 1000
	minChangePer        = 10 * time.Millisecond
	maxChangePer        = 24 * time.Hour
)

// RateLimit is server.rate_limit: at most Requests API requests per
// installation in each window of Per, or Off. It stays comparable, so
// Reload can tell whether the server section changed.
type RateLimit struct {
	Requests int
	Per      Duration
	Off      bool
}

// UnmarshalYAML reads {requests: N, per: D} or off.
func (r *RateLimit) UnmarshalYAML(n *yaml.Node) error {
	count, per, off, err := parseLimit(n, "server.rate_limit", "requests", maxRateRequests, minRatePer, maxRatePer)
	if err != nil {
		return err
	}
	*r = RateLimit{Requests: count, Per: Duration(per), Off: off}
	return nil
}

// ChangeLimit is a switch's max_changes: a bucket of Burst commands that
// gains one back every Per, or Off.
type ChangeLimit struct {
	Burst int
	Per   Duration
	Off   bool
}

// UnmarshalYAML reads {burst: N, per: D} or off.
func (c *ChangeLimit) UnmarshalYAML(n *yaml.Node) error {
	count, per, off, err := parseLimit(n, "max_changes", "burst", maxChangeBurst, minChangePer, maxChangePer)
	if err != nil {
		return err
	}
	*c = ChangeLimit{Burst: count, Per: Duration(per), Off: off}
	return nil
}

// parseLimit reads a limit written as off or as a mapping of exactly a
// count key (requests, burst) and per. Every problem is reported at its
// line, as a *yaml.TypeError so that decoding goes on past it.
func parseLimit(n *yaml.Node, name, countKey string, maxCount int, minPer, maxPer time.Duration) (count int, per time.Duration, off bool, err error) {
	example := fmt.Sprintf("{%s: 4, per: 1s}", countKey)
	if n.Kind == yaml.ScalarNode && n.Value == "off" {
		return 0, 0, true, nil
	}
	if n.Kind != yaml.MappingNode {
		return 0, 0, false, typeError(n, fmt.Sprintf("%s must be a mapping such as %s, or off", name, example))
	}
	var errs []string
	bad := func(at *yaml.Node, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("line %d: %s", at.Line, fmt.Sprintf(format, args...)))
	}
	var sawCount, sawPer bool
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case countKey:
			sawCount = true
			c, perr := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || perr != nil || c < 1 || c > maxCount {
				bad(v, "%s.%s must be a whole number from 1 to %d, not %q", name, countKey, maxCount, v.Value)
				continue
			}
			count = c
		case "per":
			sawPer = true
			d, perr := time.ParseDuration(v.Value)
			if v.Kind != yaml.ScalarNode || perr != nil || d < minPer || d > maxPer {
				bad(v, "%s.per must be a duration from %s to %s (examples: 1s, 60s, 1h), not %q", name, minPer, maxPer, v.Value)
				continue
			}
			per = d
		default:
			bad(k, "unknown key %q in %s (known: %s, per)", k.Value, name, countKey)
		}
	}
	if !sawCount || !sawPer {
		bad(n, "%s needs both %s and per, e.g. %s", name, countKey, example)
	}
	if len(errs) > 0 {
		return 0, 0, false, &yaml.TypeError{Errors: errs}
	}
	return count, per, false, nil
}
