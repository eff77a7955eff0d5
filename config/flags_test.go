package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func newFlags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("Parse(%q) = %v", args, err)
	}
	return fs
}

func TestBindFlagsRegistersEveryField(t *testing.T) {
	fs := newFlags(t)
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	want := FlagNames()
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("flags %q, want %q", names, want)
	}
}

// TestFlagHelpStatesDefault: pflag prints "(default X)" unless the default
// is empty, zero or false; for those the help text itself says what empty
// (or 0) means.
func TestFlagHelpStatesDefault(t *testing.T) {
	fs := newFlags(t)
	usage := fs.FlagUsages()
	for _, f := range BrokerFields() {
		line := ""
		for l := range strings.SplitSeq(usage, "\n") {
			if strings.Contains(l, f.Flag+" ") || strings.HasSuffix(l, f.Flag) {
				line = l
				break
			}
		}
		if line == "" {
			t.Errorf("no usage line for %s", f.Flag)
			continue
		}
		switch f.Default {
		case "", "false":
			if !strings.Contains(line, "empty") && f.Type != "bool" {
				t.Errorf("%s: default is empty and the help does not say what that means: %s", f.Flag, line)
			}
		case "0":
			if !strings.Contains(line, "0 means") {
				t.Errorf("%s: default is 0 and the help does not say what 0 means: %s", f.Flag, line)
			}
		default:
			if !strings.Contains(line, "(default ") || !strings.Contains(line, f.Default) {
				t.Errorf("%s: help does not state the default %q: %s", f.Flag, f.Default, line)
			}
		}
	}
	for _, spot := range []string{`--listen string`, `(default "127.0.0.1:7400")`, `--tiering-chunk-bytes bytes`, `(default 4MiB)`, `--replica-lag-time-max duration`, `(default 30s)`, `--gossip-join strings`} {
		if !strings.Contains(usage, spot) {
			t.Errorf("usage lacks %q:\n%s", spot, usage)
		}
	}
}

func TestFlagsApplyOnlyWhenSet(t *testing.T) {
	// A bound but unset flag must not override the file or the environment
	// with its default.
	path := writeFile(t, "listen: 127.0.0.1:8400\n")
	b, err := Load(path, envMap(map[string]string{"STRATA_DATA_DIR": "/env"}), newFlags(t))
	if err != nil {
		t.Fatal(err)
	}
	if b.Listen != "127.0.0.1:8400" || b.DataDir != "/env" {
		t.Errorf("unset flags overrode other sources: listen %s, data_dir %s", b.Listen, b.DataDir)
	}
}

func TestFlagForms(t *testing.T) {
	fs := newFlags(t,
		"--node-id", "9",
		"--object-store-path-style=false",
		"--gossip-join", "a:7402",
		"--gossip-join", "b:7402,c:7402",
		"--topic-defaults", "retention.ms=30d",
		"--topic-defaults", "segment.bytes=64MiB",
		"--tiering-cache-bytes", "512 MiB",
		"--controller-dead-broker-timeout", "10m",
	)
	b, err := Load("", nil, fs)
	if err != nil {
		t.Fatal(err)
	}
	if b.NodeID != 9 || b.ObjectStore.PathStyle || b.Tiering.CacheBytes != 512<<20 || b.Controller.DeadBrokerTimeout.String() != "10m" {
		t.Errorf("Load = %+v", b)
	}
	if want := []string{"a:7402", "b:7402", "c:7402"}; !slices.Equal(b.Gossip.Join, want) {
		t.Errorf("repeated --gossip-join = %q, want %q", b.Gossip.Join, want)
	}
	if want := map[string]string{"retention.ms": "30d", "segment.bytes": "64MiB"}; !reflect.DeepEqual(b.TopicOverrides, want) {
		t.Errorf("repeated --topic-defaults = %v, want %v", b.TopicOverrides, want)
	}

	// A boolean flag alone means true.
	b, err = Load("", envMap(map[string]string{"STRATA_OBJECT_STORE_PATH_STYLE": "false"}), newFlags(t, "--object-store-path-style"))
	if err != nil || !b.ObjectStore.PathStyle {
		t.Errorf("--object-store-path-style alone: %v, %v", b.ObjectStore.PathStyle, err)
	}
}

func TestFlagParseErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--node-id", "abc"},
		{"--tiering-chunk-bytes", "4 megs"},
		{"--replica-lag-time-max", "soon"},
		{"--object-store-path-style=yes"},
		{"--topic-defaults", "retention.ms"},
	} {
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		fs.SetOutput(&strings.Builder{})
		BindFlags(fs)
		err := fs.Parse(args)
		if err == nil {
			t.Errorf("Parse(%q) accepted a bad value", args)
			continue
		}
		name := strings.TrimPrefix(strings.SplitN(args[0], "=", 2)[0], "--")
		if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "want ") {
			t.Errorf("Parse(%q) = %v; want the flag and what is allowed", args, err)
		}
	}
}

// TestFlagsFromOtherRegistrations: a flag registered by other means (a
// pflag StringSlice) is read through its items, not its "[a,b]" display.
func TestFlagsFromOtherRegistrations(t *testing.T) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.StringSlice("gossip-join", nil, "")
	fs.Int32("node-id", 1, "")
	if err := fs.Parse([]string{"--gossip-join", "a:1,b:2", "--node-id", "3"}); err != nil {
		t.Fatal(err)
	}
	b, err := Load("", nil, fs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Gossip.Join, []string{"a:1", "b:2"}) || b.NodeID != 3 {
		t.Errorf("Load = join %q, node %d", b.Gossip.Join, b.NodeID)
	}
}
