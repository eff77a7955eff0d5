package config_test

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/spf13/pflag"
	"github.com/strata-log/strata/config"
)

// A partition holds its topic settings as an immutable snapshot and swaps
// in a whole new one on "alter config"; readers never see half an update.
func ExampleTopic_With() {
	var current atomic.Pointer[config.Topic]
	initial, err := config.ParseTopic(map[string]string{"retention.ms": "30d"})
	if err != nil {
		panic(err)
	}
	current.Store(&initial)

	// alter config: build the next snapshot from the current one.
	next, err := current.Load().With(map[string]string{"retention.ms": "90d", "segment.bytes": "64MiB"})
	if err != nil {
		fmt.Println(err)
		return
	}
	current.Store(&next)

	_, err = current.Load().With(map[string]string{"local.retention.ms": "100d"})
	fmt.Println(err)

	info := config.TopicKeys()[0]
	fmt.Println(info.Name, "=", info.Display(fmt.Sprint(current.Load().RetentionMs)))
	// Output:
	// config: invalid value "100d" for local.retention.ms: must not exceed retention.ms (90d); want -1 or a duration up to retention.ms
	// retention.ms = 90d
}

// Load merges the file, the environment and the flags the user set.
func ExampleLoad() {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.BindFlags(fs)
	_ = fs.Parse([]string{"--node-id", "3"})

	env := func(name string) (string, bool) {
		if name == "STRATA_OBJECT_STORE_TYPE" {
			return "none", true
		}
		return "", false
	}
	b, err := config.Load("strata.example.yaml", env, fs)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.NodeID, b.ObjectStore.Type, b.Tiering.ChunkBytes, b.Replica.LagTimeMax)
	for _, name := range config.UnknownEnv([]string{"STRATA_NODEID=3"}) {
		fmt.Fprintln(os.Stdout, "warning: unknown variable", name)
	}
	// Output:
	// 3 none 4MiB 30s
	// warning: unknown variable STRATA_NODEID
}
