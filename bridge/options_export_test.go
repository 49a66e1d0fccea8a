package bridge

// Configure changes a switchboard's options in place, for the tests that
// build one with a helper and then set what they observe. Outside tests a
// switchboard's options are fixed at NewSwitchboard.
func Configure(h *Switchboard, set func(o *SwitchboardOptions)) { set(&h.opts) }
