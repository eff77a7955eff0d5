package hotlog

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DiskSyncGroup returns a group whose file-system sync is syncfs(2) of the
// file system holding dir; it holds dir open until Close. A file joins only
// if its directory is on that file system, so a partition directory mounted
// elsewhere keeps its own fsyncs.
//
// It returns nil (every fsync per file) unless dir is on a file system
// syncfsReachesStorage knows.
func DiskSyncGroup(dir string, after int) (*SyncGroup, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return nil, fmt.Errorf("hotlog: shared sync: statfs %s: %w", dir, err)
	}
	if !syncfsReachesStorage(int64(fs.Type)) {
		return nil, nil
	}
	return syncfsGroup(dir, after)
}

// syncfsReachesStorage reports whether syncfs(2) on a file system of this
// type (statfs f_type) writes and waits for every dirty page: local ext4,
// XFS and Btrfs. On FUSE, for one, syncfs may succeed without the data
// reaching storage.
func syncfsReachesStorage(fsType int64) bool {
	switch fsType {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC:
		return true
	}
	return false
}

// syncfsGroup is DiskSyncGroup on any file system.
func syncfsGroup(dir string, after int) (*SyncGroup, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("hotlog: shared sync: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		d.Close()
		return nil, fmt.Errorf("hotlog: shared sync: stat %s: %w", dir, err)
	}
	dev := st.Dev
	g := NewSyncGroup(func() error {
		if err := unix.Syncfs(int(d.Fd())); err != nil {
			return fmt.Errorf("syncfs %s: %w", dir, err)
		}
		return nil
	}, func(path string) bool {
		var st unix.Stat_t
		return unix.Stat(filepath.Dir(path), &st) == nil && st.Dev == dev
	}, after)
	g.close = d.Close
	return g, nil
}
