package console

// The devices page: the devices the hub heard announce themselves on its
// MQTT broker (switchbridge devices), each with the switch that uses it,
// and Adopt for the others: what switchbridge devices adopt does, through
// the same code (Hub.Devices), after which the hub reloads and serves the
// new switch. A new broker login's password is shown once, on the answer
// of the adoption, which asks for the owner's password first.

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
)

type devicesView struct {
	// Discovers is whether the hub discovers devices at all.
	Discovers bool
	Devices   []deviceRow
	Locations []*bridge.Location
}

type deviceRow struct {
	bridge.DiscoveredDevice
	// N numbers the row, for its controls' ids: a device's own id is
	// what it announced, not fit for one.
	N int
	// What is its firmware, model and version; Online what it last said
	// of itself.
	What, Online string
}

func (c *Console) devices(q *Request) {
	v, err := c.devicesView(q)
	if err != nil {
		c.Failed(q.W, q.R, err)
		return
	}
	c.Render(q, http.StatusOK, templates()["devices"], c.View(q, "Devices", "devices", v))
}

func (c *Console) devicesView(q *Request) (devicesView, error) {
	h := c.opts.Hub
	v := devicesView{Discovers: h.Devices != nil, Locations: h.Switchboard.Locations()}
	if h.Devices == nil {
		return v, nil
	}
	devs, err := h.Devices.DiscoveredDevices(q.Ctx())
	if err != nil {
		return v, err
	}
	for i, d := range devs {
		row := deviceRow{DiscoveredDevice: d, N: i, Online: "not known",
			What: strings.Join(slices.DeleteFunc([]string{d.Firmware, d.Model, d.Version}, func(s string) bool { return s == "" }), " ")}
		if d.Online != nil {
			row.Online = map[bool]string{true: "online", false: "offline"}[*d.Online]
		}
		v.Devices = append(v.Devices, row)
	}
	return v, nil
}

// adopt adopts a discovered device into a location of the config file,
// as switchbridge devices adopt does; the hub then reloads and serves
// it. The answer, not a redirect, shows the new broker login's password,
// once.
func (c *Console) adopt(q *Request) {
	const action = "device_adopt"
	back := Path + "devices"
	h := c.opts.Hub
	device := q.Form.Get("device")
	if h.Devices == nil {
		c.Done(q, back, action, device, bridge.Errorf(bridge.ENOTFOUND, "this hub discovers no devices"), "")
		return
	}
	// It edits the config and may make a login whose password the
	// answer shows.
	if !c.Reauthenticated(q, back) {
		return
	}
	loc, err := strconv.ParseInt(q.Form.Get("location"), 10, 64)
	if err != nil {
		c.Done(q, back, action, device, bridge.Errorf(bridge.EINVALID, "choose the location the new switch goes into"), "")
		return
	}
	a, err := h.Devices.Adopt(q.Ctx(), AdoptRequest{Device: device, Location: loc,
		ID: strings.TrimSpace(q.Form.Get("id")), Name: strings.TrimSpace(q.Form.Get("name"))})
	if err != nil {
		c.Done(q, back, action, device, err, "")
		return
	}
	c.Log(q, action, device, nil)
	data, err := c.devicesView(q)
	if err != nil {
		c.Failed(q.W, q.R, err)
		return
	}
	d := c.View(q, "Devices", "devices", data)
	d.Error = ""
	d.Notice = "Switch " + a.SwitchID + " added to location " + strconv.FormatInt(loc, 10) + " in " + a.File +
		" (the previous file is " + a.Backup + ")"
	if a.NotServed == nil {
		d.Notice += "; the hub reloaded and serves it."
	} else {
		d.Notice += "."
		d.Error = "The hub could not reload, so it does not serve the new switch yet: " + bridge.ErrorMessage(a.NotServed) +
			". It does after the next reload that works (the hub's log has more)."
	}
	switch {
	case a.Password != "":
		d.Notice += " The device logs in to the hub's broker as " + a.Login + ", with the password below; switchbridge devices setup " +
			a.SwitchID + " prints what to set on it."
		d.Secrets = append(d.Secrets, Secret{Name: "The password of broker login " + a.Login, Value: a.Password})
	case a.Login != "":
		d.Notice += " Broker login " + a.Login + " serves it too."
	}
	if a.ClientID != "" {
		d.Notice += " Client id " + a.ClientID + ", which the device announced itself with, now belongs to that login."
	}
	if a.Unbound != nil {
		d.Error = strings.TrimSpace(d.Error + " The client id the device announced itself with could not be bound to its login (" +
			bridge.ErrorMessage(a.Unbound) + "): if the broker refuses it, switchbridge mqtt release-client-id frees it.")
	}
	c.Render(q, http.StatusOK, templates()["devices"], d)
}
