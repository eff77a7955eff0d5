package client

import (
	"fmt"
	"time"
)

// OffsetSpec names a position in a partition: the earliest or latest offset,
// the first offset at or after a time, or an exact offset. Build it with
// Earliest, Latest, AtTime or AtOffset; the zero value names nothing and is
// refused where a position is needed.
type OffsetSpec struct {
	kind  specKind
	value int64 // ms since the epoch for AtTime, the offset for AtOffset
}

type specKind uint8

const (
	specNone specKind = iota
	specEarliest
	specLatest
	specTime
	specOffset
)

// Earliest is the first offset still stored in the partition.
func Earliest() OffsetSpec { return OffsetSpec{kind: specEarliest} }

// Latest is the high watermark: the offset the next committed record gets.
// A consumer starting there sees only records written from now on.
func Latest() OffsetSpec { return OffsetSpec{kind: specLatest} }

// AtTime is the first offset whose record timestamp is at or after t (to the
// millisecond), or the high watermark when every record is older.
func AtTime(t time.Time) OffsetSpec { return OffsetSpec{kind: specTime, value: t.UnixMilli()} }

// AtOffset is offset n itself; it needs no lookup.
func AtOffset(n int64) OffsetSpec { return OffsetSpec{kind: specOffset, value: n} }

// IsZero reports whether s is the zero OffsetSpec, which names no position.
func (s OffsetSpec) IsZero() bool { return s.kind == specNone }

// String formats the spec as its constructor call would read.
func (s OffsetSpec) String() string {
	switch s.kind {
	case specEarliest:
		return "Earliest()"
	case specLatest:
		return "Latest()"
	case specTime:
		return fmt.Sprintf("AtTime(%s)", time.UnixMilli(s.value).UTC().Format(time.RFC3339Nano))
	case specOffset:
		return fmt.Sprintf("AtOffset(%d)", s.value)
	}
	return "OffsetSpec{}"
}

// validate refuses the zero spec and negative offsets.
func (s OffsetSpec) validate(key string) error {
	switch s.kind {
	case specNone:
		return configError(key, s, "Earliest(), Latest(), AtTime(t) or AtOffset(n)")
	case specOffset:
		if s.value < 0 {
			return configError(key, s, "an offset >= 0")
		}
	}
	return nil
}
