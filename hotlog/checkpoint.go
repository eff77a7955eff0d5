package hotlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// Checkpoint files. Each is a small binary record ending in a CRC-32C of the
// bytes before it, replaced atomically: written to name.tmp, fsynced, renamed
// over name, and the directory fsynced, so a crash leaves the old or the new
// version and never a mix.
const (
	stateFile = "state.checkpoint"
	epochFile = "leader-epoch.checkpoint"
	tmpSuffix = ".tmp"

	checkpointVersion = 1
)

var (
	stateMagic = [4]byte{'S', 'L', 'S', 'T'}
	epochMagic = [4]byte{'S', 'L', 'E', 'P'}
	crcTable   = crc32.MakeTable(crc32.Castagnoli)
)

// WriteFileAtomic replaces dir/name with data durably: a temporary file,
// synced, renamed over it, and the directory synced. The broker writes its
// own small records in the data dir with it too.
func WriteFileAtomic(fsys FS, dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.WriteAt(data, 0); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		// Whatever the temp file holds is of no use, and on a full disk
		// its blocks are wanted.
		fsys.Remove(tmp)
		return fmt.Errorf("hotlog: write %s: %w", path, err)
	}
	return nil
}

// readFile reads a whole file; ok is false when it does not exist.
func readFile(fsys FS, path string) (data []byte, ok bool, err error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, false, err
	}
	data = make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, false, err
	}
	return data, true, nil
}

// sealCheckpoint appends the CRC; openCheckpoint checks magic, version, exact
// length and CRC, and returns the body between the header and the CRC.
func sealCheckpoint(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func openCheckpoint(name string, data []byte, magic [4]byte) ([]byte, error) {
	const head = 6 // magic + version
	if len(data) < head+4 {
		return nil, fmt.Errorf("%w: %s: %d bytes is too short", ErrCorrupt, name, len(data))
	}
	if [4]byte(data[:4]) != magic {
		return nil, fmt.Errorf("%w: %s: bad magic %q", ErrCorrupt, name, data[:4])
	}
	if v := binary.BigEndian.Uint16(data[4:]); v != checkpointVersion {
		return nil, fmt.Errorf("%w: %s: unknown version %d", ErrCorrupt, name, v)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, crcTable); got != sum {
		return nil, fmt.Errorf("%w: %s: crc mismatch: stored %#08x, computed %#08x", ErrCorrupt, name, sum, got)
	}
	return body[head:], nil
}

// logState is what state.checkpoint holds.
type logState struct {
	logStart      int64
	highWatermark int64
	// recoveryPoint: every offset below it was fsynced when the checkpoint
	// was written, so recovery need not scan below it for torn writes.
	recoveryPoint int64
}

func encodeState(s logState) []byte {
	b := make([]byte, 0, 34)
	b = append(b, stateMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, checkpointVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(s.logStart))
	b = binary.BigEndian.AppendUint64(b, uint64(s.highWatermark))
	b = binary.BigEndian.AppendUint64(b, uint64(s.recoveryPoint))
	return sealCheckpoint(b)
}

func decodeState(data []byte) (logState, error) {
	body, err := openCheckpoint(stateFile, data, stateMagic)
	if err != nil {
		return logState{}, err
	}
	if len(body) != 24 {
		return logState{}, fmt.Errorf("%w: %s: body of %d bytes, want 24", ErrCorrupt, stateFile, len(body))
	}
	s := logState{
		logStart:      int64(binary.BigEndian.Uint64(body)),
		highWatermark: int64(binary.BigEndian.Uint64(body[8:])),
		recoveryPoint: int64(binary.BigEndian.Uint64(body[16:])),
	}
	if s.logStart < 0 || s.highWatermark < 0 || s.recoveryPoint < 0 {
		return logState{}, fmt.Errorf("%w: %s: negative offsets %+v", ErrCorrupt, stateFile, s)
	}
	return s, nil
}

func encodeEpochs(entries []EpochEntry) []byte {
	b := make([]byte, 0, 14+12*len(entries))
	b = append(b, epochMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, checkpointVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
	}
	return sealCheckpoint(b)
}

func decodeEpochs(data []byte) ([]EpochEntry, error) {
	body, err := openCheckpoint(epochFile, data, epochMagic)
	if err != nil {
		return nil, err
	}
	if len(body) < 4 {
		return nil, fmt.Errorf("%w: %s: missing entry count", ErrCorrupt, epochFile)
	}
	n := binary.BigEndian.Uint32(body)
	body = body[4:]
	if uint64(len(body)) != uint64(n)*12 {
		return nil, fmt.Errorf("%w: %s: %d entries need %d bytes, have %d", ErrCorrupt, epochFile, n, uint64(n)*12, len(body))
	}
	entries := make([]EpochEntry, n)
	for i := range entries {
		e := EpochEntry{
			Epoch:       int32(binary.BigEndian.Uint32(body[i*12:])),
			StartOffset: int64(binary.BigEndian.Uint64(body[i*12+4:])),
		}
		if e.Epoch < 0 || e.StartOffset < 0 || (i > 0 && (e.Epoch <= entries[i-1].Epoch || e.StartOffset < entries[i-1].StartOffset)) {
			return nil, fmt.Errorf("%w: %s: entry %d %+v out of order", ErrCorrupt, epochFile, i, e)
		}
		entries[i] = e
	}
	return entries, nil
}
