package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strata-log/strata/record"
)

// TestCLICompressionType: a topic created with compression.type=zstd
// stores what `strata produce` sends uncompressed in zstd on the broker's
// disk; after `strata topic alter --set compression.type=lz4` new batches
// are lz4 and the old ones stay zstd; `strata consume` reads them all back.
// A codec Kafka lacks is refused, naming the key.
func TestCLICompressionType(t *testing.T) {
	b := newBroker(t, 1)
	b.start()
	out := mustStrata(t, b, "", "topic", "create", "squeezed", "--config", "compression.type=zstd")
	if !slices.Contains(rowsOf(out), "compression.type zstd *override") {
		t.Fatalf("topic create with compression.type:\n%s", out)
	}
	wantFailure(t, strata(t, b, "", "topic", "create", "other", "--config", "compression.type=brotli"), "compression.type", "brotli")

	var first, second []string
	for i := range 50 {
		first = append(first, fmt.Sprintf("first-%02d-%s", i, strings.Repeat("a", 200)))
		second = append(second, fmt.Sprintf("second-%02d-%s", i, strings.Repeat("b", 200)))
	}
	mustStrata(t, b, strings.Join(first, "\n")+"\n", "produce", "squeezed", "--compression", "none")
	mustStrata(t, b, "", "topic", "alter", "squeezed", "--set", "compression.type=lz4")
	mustStrata(t, b, strings.Join(second, "\n")+"\n", "produce", "squeezed", "--compression", "none")
	if got := lines(mustStrata(t, b, "", "consume", "squeezed")); !slices.Equal(got, append(slices.Clone(first), second...)) {
		t.Fatalf("consumed %d records, want %d", len(got), len(first)+len(second))
	}

	id := ""
	for _, r := range rowsOf(mustStrata(t, b, "", "topic", "describe", "squeezed")) {
		if f := strings.Fields(r); len(f) == 2 && f[0] == "ID:" {
			id = f[1]
		}
	}
	b.stop()
	data := localLog(t, b.dataDir, "squeezed", id, 0)
	codecs := map[record.Compression]int{}
	var values []string
	for len(data) > 0 {
		batch, rest, err := record.NextVerified(data)
		if err != nil {
			t.Fatal(err)
		}
		codecs[batch.Compression()] += int(batch.NumRecords())
		recs, err := batch.Records()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			values = append(values, string(r.Value))
		}
		data = rest
	}
	if codecs[record.CompressionZstd] != len(first) || codecs[record.CompressionLZ4] != len(second) || len(codecs) != 2 {
		t.Fatalf("records by stored codec: %v; want %d in zstd, then %d in lz4", codecs, len(first), len(second))
	}
	if !slices.Equal(values, append(first, second...)) {
		t.Fatal("the records on disk differ from those produced")
	}
}
