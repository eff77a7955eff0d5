package gossip

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{Meta: Meta{BrokerID: 4}}.withDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.NodeName != "broker-4" || c.Bind != "0.0.0.0:7946" || c.Timing != LANTiming() {
		t.Fatalf("defaults: %+v", c)
	}
	if c.Timing.ReconnectInterval != 10*time.Second || c.ReconnectTimeout != 24*time.Hour {
		t.Fatalf("reconnect defaults: interval %v, timeout %v", c.Timing.ReconnectInterval, c.ReconnectTimeout)
	}
	// A reconnect interval longer than the default timeout raises the
	// default timeout with it rather than making the defaults invalid.
	c = Config{Timing: Timing{ReconnectInterval: 48 * time.Hour}}.withDefaults()
	if c.ReconnectTimeout != 48*time.Hour {
		t.Fatalf("reconnect timeout %v under a 48h interval", c.ReconnectTimeout)
	}
	// Zero timing fields are filled one by one.
	c = Config{Timing: Timing{ProbeInterval: 42 * time.Millisecond}}.withDefaults()
	if c.Timing.ProbeInterval != 42*time.Millisecond || c.Timing.ProbeTimeout != LANTiming().ProbeTimeout {
		t.Fatalf("partial timing: %+v", c.Timing)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Config)
		want  error
		field string
	}{
		{"bind host name", func(c *Config) { c.Bind = "localhost:1" }, ErrInvalidConfig, "Bind"},
		{"bind no port", func(c *Config) { c.Bind = "127.0.0.1" }, ErrInvalidConfig, "Bind"},
		{"bind port range", func(c *Config) { c.Bind = "127.0.0.1:70000" }, ErrInvalidConfig, "Bind"},
		{"advertise port 0", func(c *Config) { c.Advertise = "10.0.0.1:0" }, ErrInvalidConfig, "Advertise"},
		{"join no port", func(c *Config) { c.Join = []string{"10.0.0.1"} }, ErrInvalidConfig, "Join[0]"},
		{"key length", func(c *Config) { c.SecretKey = make([]byte, 10) }, ErrInvalidConfig, "SecretKey"},
		{"meta size", func(c *Config) { c.Meta.Rack = strings.Repeat("r", 600) }, ErrMetaTooLarge, "Meta"},
		{"negative timing", func(c *Config) { c.Timing.ProbeTimeout = -1 }, ErrInvalidConfig, "Timing.ProbeTimeout"},
		{"retry order", func(c *Config) { c.JoinRetryMin, c.JoinRetryMax = time.Minute, time.Second }, ErrInvalidConfig, "JoinRetryMax"},
		{"negative reconnect interval", func(c *Config) { c.Timing.ReconnectInterval = -time.Second }, ErrInvalidConfig, "Timing.ReconnectInterval"},
		{"negative reconnect timeout", func(c *Config) { c.ReconnectTimeout = -time.Second }, ErrInvalidConfig, "ReconnectTimeout"},
		{"reconnect timeout below interval", func(c *Config) {
			c.Timing.ReconnectInterval, c.ReconnectTimeout = time.Minute, time.Second
		}, ErrInvalidConfig, "ReconnectTimeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Bind: "127.0.0.1:0"}
			tc.edit(&c)
			err := c.withDefaults().Validate()
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v, want %v naming %s", err, tc.want, tc.field)
			}
			// Start refuses the same config before binding anything.
			if _, err := Start(c); !errors.Is(err, tc.want) {
				t.Fatalf("Start: got %v, want %v", err, tc.want)
			}
		})
	}
}
