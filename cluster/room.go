package cluster

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Room kept for the metadata store.
//
// Raft writes raft.db to record a term, a vote or a log entry, and bbolt
// puts new pages past the highest page it has used. On a file system with
// no free block those writes fail (ENOSPC), and a node can then neither
// elect itself nor commit: a broker restarted on a full disk looped through
// elections ("failed to commit logs ... no space left on device") and never
// became ready. Freeing space is the operator's job, but the broker must
// come up to serve reads meanwhile.
//
// So the node keeps room inside raft.db itself: it allocates the blocks of
// StoreReserve bytes past the file's end (fallocate with KEEP_SIZE: the
// file's size, which bbolt reads, does not change), and of any hole below
// it, when it opens and whenever KeepRoom is called while the disk has
// space. bbolt's later writes land on blocks the file already owns, so
// they need nothing from the file system. The room is counted as used
// space, so storage.min_free_bytes and other usage of the disk cannot take
// it, unlike a separate ballast file that must be deleted to be of use.
// What Raft uses is topped up again once the disk has space.

// keepRoom allocates the blocks of path up to its size plus reserve. It
// returns errRoomUnsupported where the file system (or the platform) cannot
// allocate without writing, and an error wrapping ENOSPC when the disk has
// not enough space left (what was allocated before stays).
func keepRoom(path string, reserve int64) error {
	if reserve <= 0 {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := allocate(f, st.Size()+reserve); err != nil {
		if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
			return errRoomUnsupported
		}
		return fmt.Errorf("allocate %d bytes past the end of %s: %w", reserve, path, err)
	}
	return nil
}

// errRoomUnsupported: the file system cannot allocate blocks without
// writing them (fallocate), so no room is kept.
var errRoomUnsupported = errors.New("the file system cannot preallocate (fallocate)")
