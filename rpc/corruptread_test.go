package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// Stored data that fails a check on read is CORRUPT_DATA (gRPC DataLoss),
// never Internal: these tests damage a stopped broker's log files, start
// it again and read.

// partitionDirOf is where a broker keeps partition p of a topic.
func partitionDirOf(tb *testBroker, topic, id string, p int) string {
	return filepath.Join(tb.cfg.DataDir, "logs", topic+"-"+id, strconv.Itoa(p))
}

// restart stops tb, lets edit change its files, and starts it again on a
// fresh port, waiting until partition 0 of topic is served with a high
// watermark of hw.
func restart(t *testing.T, tb *testBroker, topic string, hw int64, edit func()) *testBroker {
	t.Helper()
	tb.stop(t)
	edit()
	nb := startBroker(t, tb.cfg)
	testutil.Eventually(t, 15*time.Second, fmt.Sprintf("%s/0 to be served with high watermark %d after the restart", topic, hw), func() error {
		ans, err := nb.fetch.ListOffsets(testCtx(t), &stratav1.ListOffsetsRequest{Topic: topic,
			Query: &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_LATEST}})
		if err == nil && ans.HighWatermark == hw {
			return nil
		}
		return fmt.Errorf("%v %v", ans, err)
	})
	return nb
}

// fetchErr reads partition 0 of topic from offset to the end and returns
// the error that ends the stream (nil at the end), with how many records or
// batch bytes came before it.
func fetchErr(t *testing.T, tb *testBroker, topic string, offset int64, decode bool) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := tb.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: topic, Offset: offset, Decode: decode, StopAtEnd: true})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += len(resp.Records) + len(resp.Batches)
	}
}

func requireCorruptData(t *testing.T, err error, mentions ...string) {
	t.Helper()
	code, info, _ := errorInfo(err)
	if code != codes.DataLoss || info == nil || info.Reason != "CORRUPT_DATA" || info.Metadata["retriable"] != "false" {
		t.Fatalf("got %v (%v), want DataLoss CORRUPT_DATA", err, info)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%q does not mention %q", err, m)
		}
	}
}

// consumeErr runs the Go client's consumer over partition 0 of topic from
// the start and returns the records it delivered before the error that
// stopped it.
func consumeErr(t *testing.T, addr, topic string, serverDecode bool) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{addr}, client.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := c.NewConsumer(client.WithStopAtEnd(true), client.WithServerDecode(serverDecode))
	defer k.Close()
	if err := k.Assign(topic, 0, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		recs, err := k.Poll(ctx)
		if err != nil {
			return n, err
		}
		n += len(recs)
	}
}

// TestFetchStoredBatchThatDoesNotDecode: a batch whose header and CRC are
// valid but whose records are not (stored before the leader checked records,
// or damaged and re-checksummed) is CORRUPT_DATA naming the partition and
// offset, for a decoding fetch and for the Go client's consumer, which
// decodes itself or asks the broker to.
func TestFetchStoredBatchThatDoesNotDecode(t *testing.T) {
	b1 := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	desc := b1.createTopic(t, "stored", 1, nil)
	for _, v := range []string{"a", "b", "c"} {
		if _, err := b1.produce.Produce(testCtx(t), &stratav1.ProduceRequest{Topic: "stored", Batch: batchOf(t, v)}); err != nil {
			t.Fatal(err)
		}
	}
	// Three records where the header says 50: Append checks only the
	// header, as the leader did before it checked records.
	bad := append([]byte(nil), batchOf(t, "x", "y", "z")...)
	bad = fixBatch(bad, 50)
	b1 = restart(t, b1, "stored", 53, func() {
		opts := hotlog.DefaultOptions()
		opts.Logger = quietLogger()
		l, err := hotlog.Open(partitionDirOf(b1, "stored", desc.Id, 0), opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(bad, l.LatestEpoch()); err != nil {
			t.Fatal(err)
		}
		l.SetHighWatermark(l.LogEndOffset())
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})

	// A decoding fetch answers whole batches or nothing (as the client's
	// own decoding does), so the records before the damage come only from
	// a fetch that ends before it; the error names where the damage is.
	_, err := fetchErr(t, b1, "stored", 0, true)
	requireCorruptData(t, err, "stored/0", "offset 3", "batch says 50 records")
	if _, info, _ := errorInfo(err); info.Metadata["offset"] != "3" {
		t.Errorf("metadata offset %q, want 3", info.Metadata["offset"])
	}
	t.Logf("decoding fetch: %v", err)
	// Raw batches are served as stored: the consumer checks them.
	if _, err := fetchErr(t, b1, "stored", 0, false); err != nil {
		t.Errorf("raw fetch: %v", err)
	}

	for _, serverDecode := range []bool{false, true} {
		n, err := consumeErr(t, b1.addr, "stored", serverDecode)
		if !errors.Is(err, client.ErrCorruptData) || client.IsRetriable(err) || !strings.Contains(err.Error(), "offset 3") {
			t.Errorf("consumer (server decode %v): %v after %d records, want CORRUPT_DATA at offset 3", serverDecode, err, n)
		}
		t.Logf("consumer (server decode %v): %d records, then %v", serverDecode, n, err)
	}
}

// TestFetchDamagedLengthField: a stored batch whose length field was
// damaged on disk, where recovery does not look (below the last index entry
// it trusts), is CORRUPT_DATA, not an empty answer the consumer would ask
// for again forever.
func TestFetchDamagedLengthField(t *testing.T) {
	b1 := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	desc := b1.createTopic(t, "damaged", 1, nil)
	value := strings.Repeat("v", 1000)
	var sizes []int
	for range 20 { // 20 KiB: the offset index gets an entry every 4 KiB
		batch := batchOf(t, value)
		sizes = append(sizes, len(batch))
		if _, err := b1.produce.Produce(testCtx(t), &stratav1.ProduceRequest{Topic: "damaged", Batch: batch}); err != nil {
			t.Fatal(err)
		}
	}
	b1 = restart(t, b1, "damaged", 20, func() {
		path := filepath.Join(partitionDirOf(b1, "damaged", desc.Id, 0), "00000000000000000000.log")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// The length field of the batch at offset 2, beyond any batch size.
		binary.BigEndian.PutUint32(data[sizes[0]+sizes[1]+8:], 0x7fff0000)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	for _, decode := range []bool{false, true} {
		_, err := fetchErr(t, b1, "damaged", 2, decode)
		requireCorruptData(t, err, "damaged/0", "offset 2")
	}
	n, err := fetchErr(t, b1, "damaged", 0, true)
	requireCorruptData(t, err, "offset 2")
	if n != 2 {
		t.Errorf("%d records before the damage, want 2", n)
	}
	// The damage stays where it is: from the next index entry on, the log
	// reads on.
	if n, err := fetchErr(t, b1, "damaged", 10, true); err != nil || n != 10 {
		t.Errorf("fetch from 10: %d records, %v", n, err)
	}
}
