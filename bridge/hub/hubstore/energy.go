package hubstore

// The switches' energy totals (migrations 0023 and 0026): the hub's
// running totals and their ceilings, written by the MQTT driver now and
// then (bridge.EnergyStore).

import (
	"context"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

var _ bridge.EnergyStore = (*Store)(nil)

// EnergyRecords returns every stored energy total.
func (s *Store) EnergyRecords(ctx context.Context) ([]bridge.EnergyRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT switch_id, total_kwh, device_kwh, ceiling_kwh, at FROM energy_totals ORDER BY switch_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []bridge.EnergyRecord
	for rows.Next() {
		var r bridge.EnergyRecord
		var at int64
		if err := rows.Scan(&r.SwitchID, &r.Total, &r.Device, &r.Ceiling, &at); err != nil {
			return nil, err
		}
		r.At = store.FromMillis(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// SaveEnergy writes each record over the switch's previous one, in one
// transaction.
func (s *Store) SaveEnergy(ctx context.Context, rs []bridge.EnergyRecord) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, r := range rs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO energy_totals (switch_id, total_kwh, device_kwh, ceiling_kwh, at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (switch_id) DO UPDATE SET total_kwh = excluded.total_kwh, device_kwh = excluded.device_kwh, ceiling_kwh = excluded.ceiling_kwh, at = excluded.at`,
			r.SwitchID, r.Total, r.Device, r.Ceiling, store.Millis(r.At)); err != nil {
			return err
		}
	}
	return tx.Commit()
}
