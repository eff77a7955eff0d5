package hotlog

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
)

// FlushPolicy says when appended bytes are fsynced.
type FlushPolicy int8

const (
	// FlushAlways returns from an append only after its bytes are fsynced.
	// Concurrent appenders share one fsync (group commit).
	FlushAlways FlushPolicy = iota
	// FlushInterval fsyncs in the background every Config.FlushInterval.
	FlushInterval
	// FlushNever leaves writeback to the operating system; segments are still
	// fsynced once sealed (in the background) and when the log closes.
	FlushNever
)

func (p FlushPolicy) String() string {
	switch p {
	case FlushAlways:
		return "always"
	case FlushInterval:
		return "interval"
	case FlushNever:
		return "never"
	}
	return fmt.Sprintf("FlushPolicy(%d)", int8(p))
}

// ParseFlushPolicy parses "always", "interval" or "never".
func ParseFlushPolicy(s string) (FlushPolicy, error) {
	switch strings.ToLower(s) {
	case "always":
		return FlushAlways, nil
	case "interval":
		return FlushInterval, nil
	case "never":
		return FlushNever, nil
	}
	return 0, fmt.Errorf("hotlog: unknown flush policy %q: want always, interval or never", s)
}

// Config holds the settings that may change while the log is open; swap them
// with Log.Reconfigure. New values apply to the next append or roll.
type Config struct {
	// SegmentBytes: the active segment is rolled before an append would take
	// it past this size (a batch larger than this gets a segment of its
	// own). At most math.MaxUint32, since index positions are 32-bit.
	SegmentBytes int64
	// SegmentAge: the active segment is rolled once its first append is this
	// old. Zero disables age-based rolling.
	SegmentAge time.Duration
	// MaxBatchBytes: larger batches are refused with ErrBatchTooLarge.
	MaxBatchBytes int
	// FlushPolicy and, for FlushInterval, how often to fsync.
	FlushPolicy   FlushPolicy
	FlushInterval time.Duration
}

// DefaultConfig returns the settings a topic gets unless it says otherwise.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:  128 << 20,
		SegmentAge:    time.Hour,
		MaxBatchBytes: 1048588,
		FlushPolicy:   FlushAlways,
		FlushInterval: 100 * time.Millisecond,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < 1024 || c.SegmentBytes > math.MaxUint32:
		return fmt.Errorf("hotlog: segment bytes %d: want 1024 to %d", c.SegmentBytes, uint32(math.MaxUint32))
	case c.SegmentAge < 0:
		return fmt.Errorf("hotlog: segment age %v: want >= 0", c.SegmentAge)
	case c.MaxBatchBytes < 61:
		return fmt.Errorf("hotlog: max batch bytes %d: want >= 61", c.MaxBatchBytes)
	case c.FlushPolicy < FlushAlways || c.FlushPolicy > FlushNever:
		return fmt.Errorf("hotlog: unknown flush policy %d", c.FlushPolicy)
	case c.FlushPolicy == FlushInterval && c.FlushInterval <= 0:
		return fmt.Errorf("hotlog: flush interval %v: want > 0 with the interval policy", c.FlushInterval)
	}
	return nil
}

// Options are fixed for the life of an open log.
type Options struct {
	Config
	// IndexIntervalBytes: the indexes get an entry every this many bytes of log.
	IndexIntervalBytes int
	// FS is the file system; DiskFS unless a test wants to inject faults.
	FS FS
	// Files bounds the segment files open at once; a broker shares one
	// among all its logs. Nil gives the log a cache of its own of
	// DefaultLogFiles.
	Files *FileCache
	// Now is the clock for age-based rolling.
	Now func() time.Time
	// Logger receives recovery reports and failures.
	Logger *slog.Logger
	// OnDurable, if set, is called with the new durable offset each time
	// more of the log is fsynced (by a flush round, or a sealed segment's
	// fsync after a roll), before the
	// appenders waiting for that fsync return. It must be quick and must not
	// call back into the log's write methods; a leader uses it to move its
	// high watermark only over records that survive a crash.
	OnDurable func(durable int64)
	// SyncRollsInline makes a roll fsync the sealed segment on the
	// appending goroutine, as the flusher otherwise does in the background:
	// for a deterministic simulation that runs appends with FlushNever and
	// needs every OnDurable call on its own goroutine, in its own order.
	// It puts the fsync back on the append path, so production leaves it
	// off.
	SyncRollsInline bool
	// FlushInline runs every fsync on the goroutine that needs it, and no
	// timer: a roll's (as SyncRollsInline), an appender's under
	// FlushAlways (it runs the flush round itself when it waits), and under
	// FlushInterval only the rounds its owner asks for with Flush. For a
	// deterministic simulation that keeps the interval on its own clock;
	// production leaves it off.
	FlushInline bool
}

// DefaultOptions returns the options of a log on the local disk.
func DefaultOptions() Options {
	return Options{
		Config:             DefaultConfig(),
		IndexIntervalBytes: 4096,
		FS:                 DiskFS{},
		Now:                time.Now,
		Logger:             slog.Default(),
	}
}

func (o *Options) fillDefaults() {
	d := DefaultOptions()
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if o.FS == nil {
		o.FS = d.FS
	}
	if o.Files == nil {
		o.Files = NewFileCache(DefaultLogFiles)
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	if o.Logger == nil {
		o.Logger = d.Logger
	}
}
