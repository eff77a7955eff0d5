package record

import "strconv"

// Bits of the attributes field (bytes [21:23]).
const (
	attrCompressionMask = 0x07 // bits 0-2: Compression
	attrLogAppendTime   = 0x08 // bit 3: TimestampType
	attrTransactional   = 0x10 // bit 4
	attrControl         = 0x20 // bit 5
)

// TimestampType says what record timestamps mean: the producer's clock
// (CreateTime) or the broker's clock when it appended the batch
// (LogAppendTime). With LogAppendTime every record of a batch carries the
// batch's maxTimestamp, which lets the broker stamp a batch in place.
type TimestampType int8

// Timestamp types.
const (
	CreateTime    TimestampType = 0
	LogAppendTime TimestampType = 1
)

// String returns "CreateTime" or "LogAppendTime".
func (t TimestampType) String() string {
	switch t {
	case CreateTime:
		return "CreateTime"
	case LogAppendTime:
		return "LogAppendTime"
	}
	return "TimestampType(" + strconv.Itoa(int(t)) + ")"
}
