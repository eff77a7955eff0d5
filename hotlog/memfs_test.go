package hotlog

import (
	"os"

	"github.com/strata-log/strata/hotlog/memfs"
)

// memFS is the crashable in-memory file system of package memfs as the
// log's FS.
type memFS struct{ *memfs.FS }

func newMemFS() *memFS { return &memFS{memfs.New()} }

func (m *memFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := m.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}
