package config

import (
	"testing"
)

// The fuzz targets check that the parsers never panic and that whatever they
// accept formats to text that parses back to the same value, which is what
// lets describe output be pasted back as a value.

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"0", "-1", "1024", "512 MiB", "1.5KiB", "64KB", "8388607TiB", "1.", ".5kib", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("ParseBytes(%q): error %T is not *Error", s, err)
			}
			return
		}
		if n < Unbounded {
			t.Fatalf("ParseBytes(%q) = %d", s, n)
		}
		back, err := ParseBytes(FormatBytes(n))
		if err != nil || back != n {
			t.Fatalf("ParseBytes(%q) = %d; FormatBytes gives %q which parses to %d, %v", s, n, FormatBytes(n), back, err)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "500", "30m", "1h30m", "90d", "2w", "1d12h", "1.5h", ".5s", "1µs", "106751d23h47m16s854ms775us807ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("ParseDuration(%q): error %T is not *Error", s, err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		back, err := ParseDuration(FormatDuration(d))
		if err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %v; FormatDuration gives %q which parses to %v, %v", s, d, FormatDuration(d), back, err)
		}
	})
}

func FuzzParseMillis(f *testing.F) {
	for _, s := range []string{"-1", "0", "604800000", "7d", "1.5s", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseMillis(s)
		if err != nil {
			return
		}
		if ms < Unbounded {
			t.Fatalf("ParseMillis(%q) = %d", s, ms)
		}
		back, err := ParseMillis(FormatMillis(ms))
		if err != nil || back != ms {
			t.Fatalf("ParseMillis(%q) = %d; FormatMillis gives %q which parses to %d, %v", s, ms, FormatMillis(ms), back, err)
		}
	})
}

// FuzzDecodeFile feeds arbitrary bytes to the YAML loader: it must return a
// config or an error, never panic.
func FuzzDecodeFile(f *testing.F) {
	f.Add([]byte("node_id: 2\nraft: {listen: 127.0.0.1:1}\n"))
	f.Add([]byte("topic_defaults:\n  retention.ms: 7d\n"))
	f.Add([]byte("a: &x {b: 1}\nc: *x\n"))
	f.Add([]byte("- 1\n- 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := DefaultBroker()
		_ = decodeFile(data, "fuzz.yaml", &b, sources{})
	})
}

// FuzzTopicSet sets every topic key to arbitrary text: no panic; a refusal
// leaves the topic as it was; an accepted value reads back in a canonical
// form that parses to the same value again (for cleanup.policy's lists and
// min.cleanable.dirty.ratio's numbers as for the rest).
func FuzzTopicSet(f *testing.F) {
	for _, s := range []string{"compact", "delete, compact", "compact,,delete", "0.5", "1e-3", "NaN", "-1", "9223372036854775807", "7d", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		for _, k := range TopicKeys() {
			top := DefaultTopic()
			if err := top.Set(k.Name, value); err != nil {
				if top != DefaultTopic() {
					t.Fatalf("refused Set(%s, %q) changed the topic", k.Name, value)
				}
				continue
			}
			canon, _ := top.Get(k.Name)
			again := DefaultTopic()
			if err := again.Set(k.Name, canon); err != nil {
				t.Fatalf("Set(%s, %q) accepted, its canonical form %q refused: %v", k.Name, value, canon, err)
			}
			if got, _ := again.Get(k.Name); got != canon {
				t.Fatalf("%s: %q reads back as %q, then %q", k.Name, value, canon, got)
			}
		}
	})
}
