package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// fileSpace returns a file's size and the bytes of blocks it holds.
func fileSpace(t *testing.T, path string) (size, allocated int64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Size, st.Blocks * 512
}

// TestKeepRoom: keepRoom gives a file the blocks of reserve bytes past its
// end without changing its size, and after the file grows, tops the room
// up again.
func TestKeepRoom(t *testing.T) {
	const reserve = 1 << 20
	path := filepath.Join(t.TempDir(), "raft.db")
	if err := os.WriteFile(path, make([]byte, 10<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	err := keepRoom(path, reserve)
	if errors.Is(err, errRoomUnsupported) && runtime.GOOS != "linux" {
		t.Skipf("no room kept on %s: %v", runtime.GOOS, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	size, alloc := fileSpace(t, path)
	if size != 10<<10 || alloc < size+reserve {
		t.Fatalf("size %d with %d bytes allocated; want size 10240 and %d allocated", size, alloc, size+reserve)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 2*reserve)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := keepRoom(path, reserve); err != nil {
		t.Fatal(err)
	}
	if size, alloc = fileSpace(t, path); alloc < size+reserve {
		t.Fatalf("after growing to %d bytes: %d allocated, want %d", size, alloc, size+reserve)
	}
	if err := keepRoom(path, -1); err != nil {
		t.Fatalf("no reserve: %v", err)
	}
}

// TestNodeKeepsRoomInRaftDB: an opened node's raft.db has its reserve
// allocated past its end, once new and again after a restart.
func TestNodeKeepsRoomInRaftDB(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Bootstrap = true
	cfg.StoreReserve = 2 << 20
	for range 2 {
		n, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		waitReady(t, n)
		if n.roomShort.Load() {
			n.Close()
			if runtime.GOOS != "linux" {
				t.Skipf("no room kept on %s", runtime.GOOS)
			}
			t.Fatal("no room kept in raft.db on Linux, where fallocate keeps it")
		}
		size, alloc := fileSpace(t, n.storePath())
		if alloc < size+cfg.StoreReserve {
			t.Fatalf("raft.db of %d bytes has %d allocated, want at least %d", size, alloc, size+cfg.StoreReserve)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
