package hotlog

import "github.com/strata-log/strata/hotlog/memfs"

// The crashable in-memory file system is the log's FS as it is.
var _ FS = (*memfs.FS)(nil)
