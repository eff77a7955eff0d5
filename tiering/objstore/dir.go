package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// tempPrefix starts the name of every file a Dir writes before renaming it
// into place. Keys whose segments start with it are refused, so a temp file
// can never be mistaken for an object, and List and NewDir can find them.
const tempPrefix = ".strata-tmp-"

// dir is the Bucket of one local directory: each object is the file at its
// key under root. It is the cold tier of a single broker without an object
// store, and a second implementation that keeps the acceptance suite honest.
//
// Durability follows the checkpoint files' order: an object is written to a
// temp file beside its final path, fsynced, renamed into place and the
// directory fsynced, so a crash leaves the old object, the new one or none,
// never a part.
//
// ETags are "<inode>-<mtime ns>-<size>" of the object's file, taken from a
// stat rather than from the bytes, so that Stat and List cost no read of a
// segment. Every write goes to a new file (and so a new inode, though the
// kernel may reuse a freed one), and the Dir stamps each file it writes with
// a modification time strictly after the previous one it stamped and after
// every one it found under root at NewDir, so two writes never share an
// ETag even when they land in the same tick of the kernel's coarse clock on
// a recycled inode. NewDir checks that the file system keeps nanosecond
// modification times, which this relies on.
//
// One Dir serves one root at a time (a broker holds a lock on its data
// directory): conditional Puts are made atomic by a mutex in this process,
// and NewDir deletes every temp file it finds as the leftover of a crash.
type dir struct {
	root string

	// mu serialises the changes to the namespace: creating directories and
	// temp files, renaming objects into place (so a conditional Put checks
	// and replaces with nothing in between) and deleting objects with the
	// empty directories they leave. Data is written and fsynced outside it.
	mu sync.Mutex

	// lastStamp is the last modification time given to a file, in ns.
	lastStamp atomic.Int64
}

// NewDir returns a Bucket that stores objects as files under root, creating
// root if needed. It walks the tree once, removing the temp files of writes
// that a crash left unfinished.
func NewDir(root string) (Bucket, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("objstore: dir %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("objstore: dir %q: %w", root, err)
	}
	d := &dir{root: abs}
	if err := d.scan(); err != nil {
		return nil, err
	}
	if err := d.checkNanoTimes(); err != nil {
		return nil, err
	}
	return d, nil
}

// scan deletes every temp file under root (with one Dir per root, any that
// exists before the Dir is made belongs to a write that never finished),
// and starts the stamps after the newest object's modification time, so
// that they keep increasing across restarts even if the clock went back.
func (d *dir) scan() error {
	err := filepath.WalkDir(d.root, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		if strings.HasPrefix(e.Name(), tempPrefix) {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if ns := fi.ModTime().UnixNano(); ns > d.lastStamp.Load() {
			d.lastStamp.Store(ns)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("objstore: dir %q: scanning: %w", d.root, err)
	}
	return nil
}

// checkNanoTimes makes sure the file system stores the nanoseconds of a
// modification time, which the ETags need to tell writes apart.
func (d *dir) checkNanoTimes() error {
	f, err := os.CreateTemp(d.root, tempPrefix+"probe-*")
	if err != nil {
		return fmt.Errorf("objstore: dir %q: %w", d.root, err)
	}
	name := f.Name()
	defer os.Remove(name)
	f.Close()
	want := time.Unix(1_700_000_000, 123_456_789)
	if err := os.Chtimes(name, want, want); err != nil {
		return fmt.Errorf("objstore: dir %q: %w", d.root, err)
	}
	fi, err := os.Stat(name)
	if err != nil {
		return fmt.Errorf("objstore: dir %q: %w", d.root, err)
	}
	if !fi.ModTime().Equal(want) {
		return fmt.Errorf("objstore: dir %q: the file system keeps modification times only to %v, and ETags need nanoseconds", d.root, fi.ModTime().Sub(want).Abs())
	}
	return nil
}

// checkKey validates key and returns its path.
func (d *dir) checkKey(key string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	for seg := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(seg, tempPrefix) {
			return "", fmt.Errorf("objstore: invalid key %q: segments starting with %q are reserved for temp files", key, tempPrefix)
		}
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// dirInfo describes the object file fi of key.
func dirInfo(key string, fi fs.FileInfo) ObjectInfo {
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return ObjectInfo{
		Key:     key,
		Size:    fi.Size(),
		ETag:    fmt.Sprintf("%d-%d-%d", ino, fi.ModTime().UnixNano(), fi.Size()),
		ModTime: fi.ModTime(),
	}
}

// isMissing reports whether err from opening a path means no object is
// there: nothing at the path, or a file where the key needs a directory.
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// openObject opens the object file of key for reading.
func (d *dir) openObject(ctx context.Context, op, key string) (*os.File, ObjectInfo, error) {
	if err := ctxErr(ctx, op, key); err != nil {
		return nil, ObjectInfo{}, err
	}
	path, err := d.checkKey(key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	f, err := os.Open(path)
	if isMissing(err) {
		return nil, ObjectInfo{}, fmt.Errorf("objstore: %s %q: %w", op, key, ErrNotFound)
	}
	if err != nil {
		return nil, ObjectInfo{}, fmt.Errorf("objstore: %s %q: %w", op, key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, ObjectInfo{}, fmt.Errorf("objstore: %s %q: %w", op, key, err)
	}
	if !fi.Mode().IsRegular() {
		// A directory: the key is only a prefix of other keys.
		f.Close()
		return nil, ObjectInfo{}, fmt.Errorf("objstore: %s %q: %w", op, key, ErrNotFound)
	}
	return f, dirInfo(key, fi), nil
}

// Open implements Reader. The handle reads the file that was in place at
// Open, even if a later write replaces it.
func (d *dir) Open(ctx context.Context, key string) (ObjectReader, error) {
	f, info, err := d.openObject(ctx, "open", key)
	if err != nil {
		return nil, err
	}
	return &dirReader{key: key, f: f, size: info.Size}, nil
}

// Get implements Reader. Data and info come from one open file, so they
// describe the same version.
func (d *dir) Get(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	f, info, err := d.openObject(ctx, "get", key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	defer f.Close()
	data := make([]byte, info.Size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, ObjectInfo{}, fmt.Errorf("objstore: get %q: %w", key, err)
	}
	return data, info, nil
}

// Stat implements Reader.
func (d *dir) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ctxErr(ctx, "stat", key); err != nil {
		return ObjectInfo{}, err
	}
	path, err := d.checkKey(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	fi, err := os.Lstat(path)
	if isMissing(err) || (err == nil && !fi.Mode().IsRegular()) {
		return ObjectInfo{}, fmt.Errorf("objstore: stat %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("objstore: stat %q: %w", key, err)
	}
	return dirInfo(key, fi), nil
}

// List implements Reader. It starts at the deepest directory the prefix
// names and walks down in key order, which is not the order of a plain
// directory walk: "a.b" sorts before "a/1" because '.' < '/'. Each
// directory's entries are therefore sorted with a slash after directory
// names, the byte every key inside them continues with.
func (d *dir) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := ctxErr(ctx, "list", prefix); err != nil {
		return err
	}
	keyDir, namePrefix := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		keyDir, namePrefix = prefix[:i], prefix[i+1:]
		if _, err := d.checkKey(keyDir); err != nil {
			// Every segment before the last slash of the prefix would be a
			// whole segment of a matching key, and no valid key has it.
			return nil
		}
	}
	return d.walk(ctx, prefix, keyDir, namePrefix, fn)
}

// walk lists the objects in the directory of keyDir whose names start with
// namePrefix, recursing into subdirectories, in key order.
func (d *dir) walk(ctx context.Context, prefix, keyDir, namePrefix string, fn func(ObjectInfo) error) error {
	path := d.root
	if keyDir != "" {
		path = filepath.Join(d.root, filepath.FromSlash(keyDir))
	}
	entries, err := os.ReadDir(path)
	if isMissing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	type entry struct {
		sortKey string
		e       fs.DirEntry
	}
	sorted := make([]entry, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, namePrefix) || strings.HasPrefix(name, tempPrefix) {
			continue
		}
		if e.IsDir() {
			name += "/"
		} else if !e.Type().IsRegular() {
			continue
		}
		sorted = append(sorted, entry{name, e})
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].sortKey < sorted[j].sortKey })
	for _, s := range sorted {
		if err := ctxErr(ctx, "list", prefix); err != nil {
			return err
		}
		key := s.e.Name()
		if keyDir != "" {
			key = keyDir + "/" + key
		}
		if s.e.IsDir() {
			if err := d.walk(ctx, prefix, key, "", fn); err != nil {
				return err
			}
			continue
		}
		fi, err := s.e.Info()
		if isMissing(err) {
			continue // deleted since ReadDir
		}
		if err != nil {
			return fmt.Errorf("objstore: list %q: %w", prefix, err)
		}
		if err := fn(dirInfo(key, fi)); err != nil {
			return err
		}
	}
	return nil
}

// Create implements Bucket: the bytes go to a temp file that Close renames
// into place.
func (d *dir) Create(ctx context.Context, key string) (Writer, error) {
	if err := ctxErr(ctx, "create", key); err != nil {
		return nil, err
	}
	path, err := d.checkKey(key)
	if err != nil {
		return nil, err
	}
	f, err := d.newTemp("create", key, path)
	if err != nil {
		return nil, err
	}
	return &dirWriter{ctx: ctx, d: d, key: key, path: path, f: f}, nil
}

// Put implements Bucket: the object is written to a temp file first, and
// the conditions are checked and the file renamed into place under d.mu,
// so concurrent conditional Puts serialise.
func (d *dir) Put(ctx context.Context, key string, data []byte, opts WriteOptions) (ObjectInfo, error) {
	if err := ctxErr(ctx, "put", key); err != nil {
		return ObjectInfo{}, err
	}
	path, err := d.checkKey(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	f, err := d.newTemp("put", key, path)
	if err != nil {
		return ObjectInfo{}, err
	}
	if _, err := f.Write(data); err != nil {
		d.discard(f)
		return ObjectInfo{}, fmt.Errorf("objstore: put %q: %w", key, err)
	}
	return d.commit(ctx, "put", key, path, f, opts)
}

// newTemp creates a temp file in the directory of path, creating the
// directories it needs durably.
func (d *dir) newTemp(op, key, path string) (*os.File, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.mkdirsLocked(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("objstore: %s %q: %w", op, key, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), tempPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("objstore: %s %q: %w", op, key, err)
	}
	return f, nil
}

// mkdirsLocked creates dir and its missing parents, fsyncing the parent of
// each one it creates so that the new entries survive a crash with the
// object put in them.
func (d *dir) mkdirsLocked(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is an object, not a directory of objects", dir)
		}
		return nil
	}
	if dir == d.root {
		return fmt.Errorf("root %s is gone", dir)
	}
	parent := filepath.Dir(dir)
	if err := d.mkdirsLocked(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// stamp returns a modification time for a new object file, strictly after
// every one stamped before by this Dir.
func (d *dir) stamp() time.Time {
	for {
		last := d.lastStamp.Load()
		now := max(time.Now().UnixNano(), last+1)
		if d.lastStamp.CompareAndSwap(last, now) {
			return time.Unix(0, now)
		}
	}
}

// commit makes the temp file f the object at path: stamp, fsync, check the
// conditions and rename under d.mu, fsync the directory. On any failure the
// temp file is removed and nothing changes.
func (d *dir) commit(ctx context.Context, op, key, path string, f *os.File, opts WriteOptions) (ObjectInfo, error) {
	fail := func(err error) (ObjectInfo, error) {
		d.discard(f)
		return ObjectInfo{}, fmt.Errorf("objstore: %s %q: %w", op, key, err)
	}
	t := d.stamp()
	if err := os.Chtimes(f.Name(), t, t); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	// The rename keeps inode, size and modification time, so the temp
	// file's stat is the object's.
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	d.mu.Lock()
	err = d.checkLocked(ctx, path, opts)
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	d.mu.Unlock()
	if err != nil {
		os.Remove(f.Name())
		return ObjectInfo{}, fmt.Errorf("objstore: %s %q: %w", op, key, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return ObjectInfo{}, fmt.Errorf("objstore: %s %q: %w", op, key, err)
	}
	return dirInfo(key, fi), nil
}

// checkLocked returns an error if the write must not replace what is at
// path: the context ended, or a condition does not hold.
func (d *dir) checkLocked(ctx context.Context, path string, opts WriteOptions) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrAborted, err)
	}
	if !opts.IfAbsent && opts.IfMatch == "" {
		return nil
	}
	fi, err := os.Lstat(path)
	exists := err == nil && fi.Mode().IsRegular()
	if err != nil && !isMissing(err) {
		return err
	}
	if opts.IfAbsent && exists {
		return fmt.Errorf("if absent: object exists: %w", ErrPreconditionFailed)
	}
	if opts.IfMatch != "" {
		if !exists {
			return fmt.Errorf("if ETag %s: no such object: %w", opts.IfMatch, ErrPreconditionFailed)
		}
		if etag := dirInfo("", fi).ETag; etag != opts.IfMatch {
			return fmt.Errorf("if ETag %s: ETag is %s: %w", opts.IfMatch, etag, ErrPreconditionFailed)
		}
	}
	return nil
}

// discard closes and removes a temp file that will not become an object.
func (d *dir) discard(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// Delete implements Bucket. It also removes the directories the object
// leaves empty, so that deleted topics leave no trees of empty directories.
func (d *dir) Delete(ctx context.Context, key string) error {
	if err := ctxErr(ctx, "delete", key); err != nil {
		return err
	}
	path, err := d.checkKey(key)
	if err != nil {
		return err
	}
	d.mu.Lock()
	fi, err := os.Lstat(path)
	if isMissing(err) || (err == nil && fi.IsDir()) {
		d.mu.Unlock()
		return nil
	}
	if err == nil {
		err = os.Remove(path)
	}
	if err != nil {
		d.mu.Unlock()
		return fmt.Errorf("objstore: delete %q: %w", key, err)
	}
	// The nearest directory still there holds the last entry removed, and
	// is the one to fsync. A directory that is not empty stops the pruning.
	parent := filepath.Dir(path)
	for parent != d.root && os.Remove(parent) == nil {
		parent = filepath.Dir(parent)
	}
	d.mu.Unlock()
	if err := syncDir(parent); err != nil {
		return fmt.Errorf("objstore: delete %q: %w", key, err)
	}
	return nil
}

// syncDir fsyncs a directory, making the entries added, renamed or removed
// in it durable.
func syncDir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// dirReader reads one object file.
type dirReader struct {
	key  string
	f    *os.File
	size int64
}

func (r *dirReader) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := ctxErr(ctx, "read", r.key); err != nil {
		return 0, err
	}
	n, tailErr := ReadRange(r.key, r.size, off, len(p))
	if n == 0 {
		return 0, tailErr
	}
	// pread: safe for concurrent use, and it does not move a shared offset.
	m, err := r.f.ReadAt(p[:n], off)
	if m < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF // the file shrank, which objects never do
		}
		return m, fmt.Errorf("objstore: read %q: %w", r.key, err)
	}
	return n, tailErr
}

func (r *dirReader) Size() int64  { return r.size }
func (r *dirReader) Close() error { return r.f.Close() }

// dirWriter streams an object into its temp file.
type dirWriter struct {
	ctx   context.Context
	d     *dir
	key   string
	path  string
	f     *os.File
	state writeState
}

func (w *dirWriter) Write(p []byte) (int, error) {
	if err := w.state.usable(w.ctx, "write", w.key); err != nil {
		w.abort()
		return 0, err
	}
	n, err := w.f.Write(p)
	if err != nil {
		w.abort()
		return n, fmt.Errorf("objstore: write %q: %w: %w", w.key, ErrAborted, err)
	}
	return n, nil
}

func (w *dirWriter) Close() error {
	if w.state == writeClosed {
		return nil
	}
	if err := w.state.usable(w.ctx, "close", w.key); err != nil {
		w.abort()
		return err
	}
	if _, err := w.d.commit(w.ctx, "close", w.key, w.path, w.f, WriteOptions{}); err != nil {
		// commit removed the temp file; a second Close must not report
		// success.
		w.state = writeAborted
		return err
	}
	w.state = writeClosed
	return nil
}

func (w *dirWriter) Abort() error {
	w.abort()
	return nil
}

// abort removes the temp file of a writer that will never commit.
func (w *dirWriter) abort() {
	if w.state == writeOpen {
		w.state = writeAborted
		w.d.discard(w.f)
	}
}
