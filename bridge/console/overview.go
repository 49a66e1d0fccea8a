package console

import (
	"net/http"

	"github.com/switchbridge/switchbridge/bridge/infra/version"
)

// overview is the console's first page: how this process is (version,
// uptime, store, switches, broker, hubs, the last warnings of its log).
func (c *Console) overview(q *Request) {
	items := []HealthItem{{Name: "Version", Value: version.Get().String()}}
	if c.opts.Health != nil {
		items = c.opts.Health(q.Ctx())
	}
	c.Render(q, http.StatusOK, templates()["overview"], c.View(q, "Overview", "", items))
}
