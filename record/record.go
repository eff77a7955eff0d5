package record

// Header is one record header. Kafka header keys are non-null strings;
// a nil Value is a null value.
type Header struct {
	Key   string
	Value []byte
}

// Record is one decoded (or to be encoded) record.
type Record struct {
	// Offset is the absolute offset: base offset + offset delta on decode.
	// The Builder ignores it: offsets follow the order of Add.
	Offset int64
	// Timestamp in ms since the epoch. On decode: baseTimestamp + delta, or
	// the batch's maxTimestamp when the batch is LogAppendTime.
	Timestamp int64
	// Key and Value: nil means null, which Kafka tells apart from empty.
	Key   []byte
	Value []byte
	// Headers is nil when the record has none.
	Headers []Header
}
