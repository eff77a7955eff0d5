package broker

import (
	"testing"
	"time"

	"github.com/strata-log/strata/record"
)

// keyedBatch encodes one record per key, with codec c; a nil key makes a
// record without one.
func keyedBatch(t *testing.T, now time.Time, c record.Compression, keys ...[]byte) record.Batch {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.Compression = c
	bl := record.NewBuilder(opts)
	at := now.UnixMilli()
	for i, k := range keys {
		bl.Add(record.Record{Timestamp: at, Key: k, Value: []byte{byte(i)}})
	}
	b, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A compacted topic refuses a batch with any record lacking a key, whole,
// as INVALID_RECORD with Kafka's message, in every codec; keyed batches
// (an empty key is a key) are appended; a topic that only deletes takes
// records without keys as before, and so does one altered back to delete.
func TestCompactedTopicRefusesRecordsWithoutKeys(t *testing.T) {
	l := newCheckedLeader(t)
	l.alter(map[string]string{"cleanup.policy": "compact", "remote.storage.enable": "false"})
	for _, c := range codecs {
		l.refused(c.String()+" one of three keyless", keyedBatch(t, l.now, c, []byte("a"), nil, []byte("b")), ReasonInvalidRecord,
			"Compacted topic cannot accept message without key in topic partition t/0", "1 of the batch's 3 records")
		l.refused(c.String()+" all keyless", keyedBatch(t, l.now, c, nil, nil), ReasonInvalidRecord, "without key")
		l.accepted(c.String()+" keyed", keyedBatch(t, l.now, c, []byte("a"), []byte{}, []byte("b")))
	}
	l.alter(map[string]string{"cleanup.policy": "compact,delete", "remote.storage.enable": "false"})
	l.refused("compact,delete", keyedBatch(t, l.now, record.CompressionNone, nil), ReasonInvalidRecord, "without key")
	l.alter(map[string]string{"cleanup.policy": "delete"})
	l.accepted("delete", keyedBatch(t, l.now, record.CompressionNone, nil, []byte("a")))
}
