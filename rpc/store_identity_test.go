package rpc

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
)

// TestBrokerRefusesAnotherObjectStoreForItsPartitions: a broker restarted
// with another object store (path, prefix) while its data dir holds
// partitions would serve empty cold tiers, and the history in the old
// store would be unreadable without a word. It refuses to start, naming
// the setting and both values; without a store (none) it starts, and with
// the old store back it serves everything again. A fresh data dir takes any
// store.
func TestBrokerRefusesAnotherObjectStoreForItsPartitions(t *testing.T) {
	dir := t.TempDir()
	cfg := brokerConfig(t, 1, filepath.Join(dir, "b1"))
	cfg.ObjectStore.Type = config.ObjectStoreFS
	cfg.ObjectStore.Path = filepath.Join(dir, "store-a")
	b := startBroker(t, cfg)
	b.createTopic(t, "t", 1, nil)
	if _, err := b.send(t, "t", batchOf(t, "a", "b"), 0); err != nil {
		t.Fatal(err)
	}
	b.stop(t)

	start := func(c config.Broker) (*broker.Broker, error) {
		c.Listen = "127.0.0.1:0"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return broker.Start(ctx, c, quietLogger(), NewPeers(nil, ""))
	}
	for key, move := range map[string]func(*config.Broker){
		"object_store.path":   func(c *config.Broker) { c.ObjectStore.Path = filepath.Join(dir, "store-b") },
		"object_store.prefix": func(c *config.Broker) { c.ObjectStore.Prefix = "elsewhere" },
	} {
		moved := cfg
		move(&moved)
		nb, err := start(moved)
		if err == nil {
			nb.Close()
			t.Fatalf("a broker started with %s changed under a data dir with partitions", key)
		}
		if !errors.Is(err, broker.ErrStoreChanged) || !strings.Contains(err.Error(), key) {
			t.Fatalf("%s changed: %v; want ErrStoreChanged naming the key", key, err)
		}
		t.Logf("%s changed: %v", key, err)
	}
	none := cfg
	none.ObjectStore.Type = config.ObjectStoreNone
	startBroker(t, none).stop(t)

	back := startBroker(t, cfg)
	testutil.WaitFor(t, 20*time.Second, "the records read back with the old store", func() bool {
		_, recs := back.readAll(t, "t", 0, 0)
		return len(recs) == 2
	})
	back.stop(t)

	fresh := cfg
	fresh.DataDir = filepath.Join(dir, "b2")
	fresh.ObjectStore.Path = filepath.Join(dir, "store-b")
	startBroker(t, fresh).stop(t)
}
