package record

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var writeSeeds = flag.Bool("write-fuzz-seeds", false, "rewrite the checked-in seed corpus under testdata/fuzz")

// TestWriteFuzzSeeds regenerates the explicit seed files (valid batches of
// every codec) when run with -write-fuzz-seeds; otherwise it checks that
// they exist, so a lost corpus is noticed. The files use Go's corpus format,
// the same that `go test -fuzz` writes for failing inputs.
func TestWriteFuzzSeeds(t *testing.T) {
	seeds := map[string][]any{}
	batches := seedBatches(t)
	for i, codec := range allCodecs {
		b := Batch(batches[i])
		seeds["FuzzNext/seed-"+codec.String()] = []any{[]byte(b)}
		seeds["FuzzDecodeRecords/seed-"+codec.String()] = []any{
			byte(codec), uint16(b.NumRecords()), false, []byte(b[HeaderSize:]),
		}
		seeds["FuzzValidateRecordsLimit/seed-"+codec.String()] = []any{
			byte(codec), uint32(b.NumRecords()), false, uint32(1 << 20), []byte(b[HeaderSize:]),
		}
		seeds["FuzzRoundTrip/seed-"+codec.String()] = []any{
			byte(codec), byte(i + 2), []byte("key"), bytes.Repeat([]byte("value "), 1+i*150),
			false, i == 3, "trace", []byte("0af7651916cd43dd"), int64(1_700_000_000_000), int64(i - 2),
		}
	}
	seeds["FuzzNext/seed-concat"] = []any{batches[len(batches)-1]}
	seeds["FuzzNext/seed-torn"] = []any{batches[len(batches)-1][:len(batches[len(batches)-1])-3]}

	for name, vals := range seeds {
		path := filepath.Join("testdata", "fuzz", name)
		if !*writeSeeds {
			if _, err := os.Stat(path); err != nil {
				t.Errorf("seed file missing (run go test -run TestWriteFuzzSeeds -write-fuzz-seeds): %v", err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, marshalCorpus(vals...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// marshalCorpus writes values as `go test fuzz v1` corpus files do.
func marshalCorpus(vals ...any) []byte {
	out := []byte("go test fuzz v1\n")
	for _, v := range vals {
		switch v := v.(type) {
		case []byte:
			out = fmt.Appendf(out, "[]byte(%q)\n", v)
		case string:
			out = fmt.Appendf(out, "string(%q)\n", v)
		case byte:
			out = fmt.Appendf(out, "byte(%q)\n", v)
		case uint16, uint32, int64, bool:
			out = fmt.Appendf(out, "%T(%v)\n", v, v)
		default:
			panic(fmt.Sprintf("unsupported corpus type %T", v))
		}
	}
	return out
}
