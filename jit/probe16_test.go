package jit

import (
	"strings"
	"testing"
)

// TestProbe16InitNVSHMEMUnusableDevice: InitNVSHMEM on a closed, nil or zero Device is an error
// naming it. Before, a closed emulator device initialised NVSHMEM and its Malloc succeeded
// (only Finalize said the device was closed), a zero Device read "the  backend has no
// NVSHMEM host support" and a nil one panicked (nil pointer); probe 16.
func TestProbe16InitNVSHMEMUnusableDevice(t *testing.T) {
	closed, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		d    *Device
		want string
	}{
		{"closed", closed, "InitNVSHMEM: emu device 0"},
		{"nil", nil, "InitNVSHMEM on a nil *Device"},
		{"zero", &Device{}, "InitNVSHMEM on a zero Device, not opened"},
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: InitNVSHMEM panicked: %v", c.name, r)
				}
			}()
			rv := &Rendezvous{Rank: 0, WorldSize: 1, Addr: "127.0.0.1:1"}
			s, err := InitNVSHMEM(c.d, InitOptions{Rendezvous: rv})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: InitNVSHMEM: %v, %v; want an error holding %q", c.name, s, err, c.want)
			}
			if c.name == "closed" && (err == nil || !strings.Contains(err.Error(), "closed")) {
				t.Errorf("closed: %v; want it to say closed", err)
			}
		}()
	}
}
