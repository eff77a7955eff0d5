package broker

// Which object store a data dir's partitions were tiered to. A broker moved
// to another store across a restart (object_store.type, path, endpoint,
// bucket or prefix changed) finds empty manifests there: its leaders take
// them over, upload from their local start and serve nothing below it, and
// the history in the old store is unreadable without a word (invariant 14:
// no setting strands history). So the data dir records the store it is
// used with, in the file object-store, and a broker whose store changed
// while its data dir holds partitions refuses to start, naming the setting,
// its old and new values and the ways out.
//
// A store set to none is let through and not recorded: such a broker tiers
// nothing, answers every read below its local log saying why it cannot
// serve it (fetch.go, noStoreError), and serves it again once the old
// store is set back.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
)

// storeIdentityFile is the record, in the data dir.
const storeIdentityFile = "object-store"

// storeIdentity is where a store keeps objects: the settings that move it.
// Path is object_store.path as configured (empty: the default inside the
// data dir, which moves with it).
type storeIdentity struct {
	Type     string `json:"type"`
	Path     string `json:"path,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	Bucket   string `json:"bucket,omitempty"`
	Prefix   string `json:"prefix,omitempty"`
}

func identityOfStore(s config.ObjectStore) storeIdentity {
	switch s.Type {
	case config.ObjectStoreFS:
		return storeIdentity{Type: s.Type, Path: s.Path, Prefix: s.Prefix}
	case config.ObjectStoreS3:
		return storeIdentity{Type: s.Type, Endpoint: s.Endpoint, Bucket: s.Bucket, Prefix: s.Prefix}
	}
	return storeIdentity{Type: s.Type}
}

// diff names the first setting in which cur differs from was, with both
// values.
func (was storeIdentity) diff(cur storeIdentity) (key, old, now string) {
	for _, f := range []struct{ key, old, now string }{
		{"object_store.type", was.Type, cur.Type},
		{"object_store.path", was.Path, cur.Path},
		{"object_store.endpoint", was.Endpoint, cur.Endpoint},
		{"object_store.bucket", was.Bucket, cur.Bucket},
		{"object_store.prefix", was.Prefix, cur.Prefix},
	} {
		if f.old != f.now {
			return f.key, f.old, f.now
		}
	}
	return "", "", ""
}

// ErrStoreChanged marks a broker refusing to start because its object
// store is not the one its data dir's partitions were tiered to.
var ErrStoreChanged = errors.New("broker: the object store changed")

// checkStoreIdentity records the object store in dataDir, or refuses a
// store other than the recorded one while logsDir holds partitions. A
// record that cannot be written (a full disk) is logged, not fatal: a
// broker on a full disk still starts, and the record is written at a later
// start.
func checkStoreIdentity(dataDir, logsDir string, store config.ObjectStore, logger *slog.Logger) error {
	cur := identityOfStore(store)
	if cur.Type == config.ObjectStoreNone || cur.Type == "" {
		return nil
	}
	path := filepath.Join(dataDir, storeIdentityFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		recordStoreIdentity(dataDir, cur, logger)
		return nil
	case err != nil:
		return fmt.Errorf("broker: data dir: %w", err)
	}
	var was storeIdentity
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&was); err != nil {
		return fmt.Errorf("broker: %s does not say which object store this data dir was used with (%v); delete it if the store configured now is the one its topics were tiered to", path, err)
	}
	if was == cur {
		return nil
	}
	held, err := holdsPartitions(logsDir)
	if err != nil {
		return fmt.Errorf("broker: data dir: %w", err)
	}
	if !held {
		recordStoreIdentity(dataDir, cur, logger)
		return nil
	}
	key, old, now := was.diff(cur)
	return fmt.Errorf("%w: %s is %q, but the partitions in data dir %s were tiered with %s %q, so their history in the cold tier is in that store, and this one would not serve it. "+
		"Set %s back to %q; or, to move the cold tier, copy its objects to the new store first and then delete %s; or start with an empty data dir and restore the topics from the new store (strata topic restore)",
		ErrStoreChanged, key, now, dataDir, key, old, key, old, path)
}

// holdsPartitions reports whether the broker's logs dir holds any
// partition.
func holdsPartitions(logsDir string) (bool, error) {
	entries, err := os.ReadDir(logsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return len(entries) > 0, err
}

func recordStoreIdentity(dataDir string, cur storeIdentity, logger *slog.Logger) {
	if err := writeStoreIdentity(dataDir, cur); err != nil {
		logger.Warn("cannot record the object store in the data dir; a change of store will not be caught until it is", "err", err)
	}
}

// writeStoreIdentity records cur in dataDir, durably.
func writeStoreIdentity(dataDir string, cur storeIdentity) error {
	data, err := json.MarshalIndent(cur, "", "  ")
	if err != nil {
		return err
	}
	if err := hotlog.WriteFileAtomic(hotlog.DiskFS{}, dataDir, storeIdentityFile, append(data, '\n')); err != nil {
		return fmt.Errorf("broker: recording the object store in the data dir: %w", err)
	}
	return nil
}
