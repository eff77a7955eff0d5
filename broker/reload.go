package broker

// Settings that change while the broker runs.

import (
	"slices"
	"time"

	"github.com/strata-log/strata/config"
)

// liveSettings are the broker settings Reload applies without a restart.
var liveSettings = []string{"tiering.cold_read_bytes_per_sec", "tiering.cold_read_gets_per_sec"}

// Reload applies the settings of next that can change while the broker
// runs (liveSettings). It returns those that changed since the last
// reload, and the other settings that differ from the ones the broker
// started with, which take effect only after a restart.
func (b *Broker) Reload(next config.Broker) (applied, needRestart []string) {
	b.reload.Lock()
	defer b.reload.Unlock()
	for _, path := range config.Changed(b.cfg, next) {
		if !slices.Contains(liveSettings, path) {
			needRestart = append(needRestart, path)
		}
	}
	for _, path := range config.Changed(b.reload.live, next) {
		if slices.Contains(liveSettings, path) {
			applied = append(applied, path)
		}
	}
	b.reload.live = next
	if b.coldPace != nil {
		now := time.Now()
		b.coldPace.bytes.setRate(int64(next.Tiering.ColdReadBytesPerSec), now)
		b.coldPace.gets.setRate(int64(next.Tiering.ColdReadGetsPerSec), now)
	}
	return applied, needRestart
}
