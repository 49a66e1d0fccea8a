// Package monitoring holds what the package ships for watching a hub with
// Prometheus and Grafana (a scrape config, alerting rules, a dashboard),
// with tests that check them with promtool and against a live hub's
// metrics; it has no Go code to import.
package monitoring
