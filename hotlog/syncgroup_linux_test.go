package hotlog

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// On the real disk, with syncfs: logs appending at once while one holds
// the per-file fsync are answered by syncfs rounds, and everything
// acknowledged is there to read.
func TestSyncfsGroupAnswersFsyncsOnTheDisk(t *testing.T) {
	dir := t.TempDir()
	g, err := syncfsGroup(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	const logs = 50
	for _, l := range appendOnceHeld(t, dir, holdFirstSync(DiskFS{}), g, logs) {
		checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if st := g.Stats(); st.Rounds == 0 || st.Shared != logs-1 || st.Off {
		t.Fatalf("stats %+v: want syncfs rounds answering %d fsyncs", st, logs-1)
	}
}

// A directory on another file system is not covered by the data directory's
// syncfs, so its files keep their own fsyncs.
func TestSyncfsGroupCoversOnlyItsFileSystem(t *testing.T) {
	dir := t.TempDir()
	g, err := syncfsGroup(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if !g.covers(filepath.Join(dir, "00000000000000000000.log")) {
		t.Fatal("a file in the group's own directory is not covered")
	}
	other := "/proc/self" // procfs: always another file system than a test's temp dir
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("stat %s: %v", other, err)
	}
	if g.covers(filepath.Join(other, "status")) {
		t.Fatalf("%s is covered by the syncfs of %s", other, dir)
	}
}

// Syncs are shared only where syncfs is known to reach storage; elsewhere
// (procfs here, standing for tmpfs, FUSE, NFS and the rest) DiskSyncGroup
// gives no group and every fsync stays per file.
func TestDiskSyncGroupOnlyOnFileSystemsKnownToReachStorage(t *testing.T) {
	for _, c := range []struct {
		name   string
		fsType int64
		want   bool
	}{
		{"ext4", unix.EXT4_SUPER_MAGIC, true},
		{"xfs", unix.XFS_SUPER_MAGIC, true},
		{"btrfs", unix.BTRFS_SUPER_MAGIC, true},
		{"tmpfs", unix.TMPFS_MAGIC, false},
		{"fuse", unix.FUSE_SUPER_MAGIC, false},
		{"nfs", unix.NFS_SUPER_MAGIC, false},
		{"overlayfs", unix.OVERLAYFS_SUPER_MAGIC, false},
	} {
		if got := syncfsReachesStorage(c.fsType); got != c.want {
			t.Errorf("%s: shares syncs %v, want %v", c.name, got, c.want)
		}
	}
	g, err := DiskSyncGroup("/proc", 1)
	if err != nil || g != nil {
		t.Fatalf("DiskSyncGroup on /proc: %v, %v; want no group", g, err)
	}
}
