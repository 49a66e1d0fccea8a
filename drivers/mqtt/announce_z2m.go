package mqtt

// Zigbee2MQTT's inventory: the retained <base>/bridge/devices, a JSON
// array of every device the bridge knows, with its ieee_address,
// friendly_name, type and definition (model, vendor, exposes). A device is
// a switch when an expose of type "switch" has a feature "state" (property
// state, or state_<endpoint> on a device with several).

import (
	"encoding/json"
	"strings"
)

type z2mDevice struct {
	IEEE         string `json:"ieee_address"`
	FriendlyName string `json:"friendly_name"`
	Type         string `json:"type"`
	Disabled     bool   `json:"disabled"`
	Definition   *struct {
		Model   string      `json:"model"`
		Vendor  string      `json:"vendor"`
		Exposes []z2mExpose `json:"exposes"`
	} `json:"definition"`
	SoftwareBuildID string `json:"software_build_id"`
}

type z2mExpose struct {
	Type     string `json:"type"`
	Endpoint string `json:"endpoint"`
	Features []struct {
		Name     string `json:"name"`
		Property string `json:"property"`
	} `json:"features"`
}

// parseZ2MDevices reads <base>/bridge/devices: one device per switch
// endpoint.
func parseZ2MDevices(base string, payload []byte) ([]Device, error) {
	var list []z2mDevice
	if err := json.Unmarshal(payload, &list); err != nil {
		return nil, err
	}
	var out []Device
	for _, zd := range list {
		if zd.Type == "Coordinator" || zd.Definition == nil || zd.Disabled || zd.FriendlyName == "" || zd.IEEE == "" {
			continue
		}
		for _, e := range zd.Definition.Exposes {
			if e.Type != "switch" {
				continue
			}
			for _, f := range e.Features {
				if f.Name != "state" || !strings.HasPrefix(f.Property, "state") {
					continue
				}
				ep := e.Endpoint
				if ep == "" {
					ep = strings.TrimPrefix(strings.TrimPrefix(f.Property, "state"), "_")
				}
				d := Device{ID: "zigbee-" + zd.IEEE, Name: zd.FriendlyName, Model: clip(strings.TrimSpace(zd.Definition.Vendor+" "+zd.Definition.Model), maxIDLen),
					Version: clip(zd.SoftwareBuildID, maxIDLen), availability: base + "/" + zd.FriendlyName + "/availability",
					availableOn: "online", availableOff: "offline"}
				opts := []entryField{{"friendly_name", zd.FriendlyName}}
				if base != "zigbee2mqtt" {
					opts = append(opts, entryField{"base_topic", base})
				}
				if ep != "" {
					d.ID += "-" + ep
					d.Name += " " + ep
					opts = append(opts, entryField{"endpoint", ep})
				}
				d.Topics = DeviceTopics{Command: base + "/" + zd.FriendlyName + "/set", State: base + "/" + zd.FriendlyName, Availability: d.availability}
				if dev, err := makeDevice(d, "zigbee2mqtt", opts); err == nil {
					out = append(out, dev)
				}
				if len(out) >= maxDiscovered {
					return out, nil
				}
			}
		}
	}
	return out, nil
}
