package hubstore

// The devices the MQTT driver discovered (migrations 0021 and 0022): written by the
// running hub, read by the owner's commands in another process.

import (
	"context"
	"database/sql"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// ReplaceDiscoveredDevices replaces the list with devs, in one
// transaction: a reader sees the old list or the new one.
func (s *Store) ReplaceDiscoveredDevices(ctx context.Context, devs []bridge.DiscoveredDevice) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM discovered_devices`); err != nil {
		return err
	}
	for _, d := range devs {
		var online sql.NullInt64
		if d.Online != nil {
			online.Valid = true
			if *d.Online {
				online.Int64 = 1
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO discovered_devices (id, firmware, model, name, version, command_topic,
			state_topic, availability_topic, online, entry, used_by, last_seen, client_id, login) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.ID, d.Firmware, d.Model, d.Name, d.Version, d.CommandTopic, d.StateTopic, d.AvailabilityTopic,
			online, d.Entry, d.UsedBy, store.Millis(d.LastSeen), d.ClientID, d.Login); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// DiscoveredDevices lists the discovered devices, by id.
func (s *Store) DiscoveredDevices(ctx context.Context) ([]bridge.DiscoveredDevice, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, firmware, model, name, version, command_topic, state_topic,
		availability_topic, online, entry, used_by, last_seen, client_id, login FROM discovered_devices ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []bridge.DiscoveredDevice
	for rows.Next() {
		var d bridge.DiscoveredDevice
		var online sql.NullInt64
		var seen int64
		if err := rows.Scan(&d.ID, &d.Firmware, &d.Model, &d.Name, &d.Version, &d.CommandTopic, &d.StateTopic,
			&d.AvailabilityTopic, &online, &d.Entry, &d.UsedBy, &seen, &d.ClientID, &d.Login); err != nil {
			return nil, err
		}
		if online.Valid {
			on := online.Int64 == 1
			d.Online = &on
		}
		d.LastSeen = store.FromMillis(seen)
		out = append(out, d)
	}
	return out, rows.Err()
}
