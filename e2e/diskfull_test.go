package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
)

// TestRestartOnAFullDisk keeps a broker's data dir on a small file system
// of its own and fills it: a file beside the data dir stands for other
// usage of the disk; the test produces until the broker refuses
// (storage.min_free_bytes), then grows the other file until the file system
// has no byte left. The
// broker is killed with SIGKILL and started again on the full disk. It must
// come up (health check SERVING), serve metadata and every acknowledged
// record, refuse produce with STORAGE_FULL, and take produce again once the
// other file is deleted. Before, it did not come back: its metadata group
// could not commit on the full disk (so it never turned SERVING), its
// partitions could not open (recovery's checkpoint write failed), and so it
// refused to start there at all.
//
// The file system is a tmpfs the test mounts, which needs root (see
// smallFS); CI runs as root and must run this test.
func TestRestartOnAFullDisk(t *testing.T) {
	const (
		topic   = "full"
		minFree = 4 << 20
		value   = 4 << 10 // bytes per record
		perCall = 16      // records per produce call
	)
	fs := smallFS(t, 32<<20)
	dataDir := filepath.Join(fs, "data")
	filler := filepath.Join(fs, "filler")
	writeFile(t, filler, 6<<20)
	b := newBroker(t, 1, "--data-dir", dataDir, "--storage-min-free-bytes", fmt.Sprint(minFree))
	b.dataDir = dataDir
	b.start()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, topic, 1, 1, map[string]string{"segment.bytes": "1MiB"}); err != nil {
		t.Fatal(err)
	}

	// Produce until the broker refuses: retries off, so the refusal comes
	// back as it is. Each record's value starts with its sequence number.
	p := c.NewProducer(client.WithRetries(0), client.WithLinger(0))
	acked := map[int]int64{} // sequence -> offset
	seq := 0
	batch := func() []*client.Record {
		recs := make([]*client.Record, perCall)
		for i := range recs {
			v := make([]byte, value)
			binary.BigEndian.PutUint64(v, uint64(seq+i))
			recs[i] = &client.Record{Topic: topic, Partition: 0, Value: v}
		}
		return recs
	}
	for {
		recs := batch()
		err := p.ProduceSync(ctx, recs...)
		if err != nil {
			if !errors.Is(err, client.ErrStorageFull) {
				t.Fatalf("produce on a filling disk after %d records: %v; want STORAGE_FULL", len(acked), err)
			}
			break
		}
		for i, r := range recs {
			acked[seq+i] = r.Offset
		}
		seq += perCall
		if seq > 32<<20/value {
			t.Fatalf("%d records on a 32 MiB file system and produce still takes them", seq)
		}
	}
	t.Logf("%d records acknowledged before the broker refused, %d bytes free", len(acked), freeOn(t, fs))

	// The other usage of the disk takes what is left, while the broker
	// runs, and again once it is dead: a checkpoint it renamed into place
	// meanwhile may have freed a block.
	fillFS(t, filler)
	b.kill9()
	fillFS(t, filler)
	if n := freeOn(t, fs); n != 0 {
		t.Fatalf("%d bytes still free after filling the file system", n)
	}
	b.start()

	c2, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	md, err := c2.Metadata(ctx, topic)
	if err != nil {
		t.Fatalf("metadata from the broker on a full disk: %v", err)
	}
	if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 1 || md.Topics[0].Partitions[0].Leader != 1 {
		t.Fatalf("metadata on a full disk: %v; want topic %s with partition 0 led by broker 1", md.Topics, topic)
	}
	readAcked(ctx, t, c2, topic, acked)

	p2 := c2.NewProducer(client.WithRetries(0), client.WithLinger(0))
	err = p2.ProduceSync(ctx, batch()...)
	var se *client.Error
	if !errors.Is(err, client.ErrStorageFull) || !errors.As(err, &se) || !se.Retriable {
		t.Fatalf("produce on a full disk after the restart: %v; want a retriable STORAGE_FULL", err)
	}
	if !strings.Contains(se.Message, "storage.min_free_bytes") {
		t.Fatalf("STORAGE_FULL message %q does not name storage.min_free_bytes", se.Message)
	}

	// Space comes back, more than storage.min_free_bytes: produce is
	// taken again, without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs := batch()
		err := p2.ProduceSync(ctx, recs...)
		if err == nil {
			for i, r := range recs {
				acked[seq+i] = r.Offset
			}
			seq += perCall
			break
		}
		if !errors.Is(err, client.ErrStorageFull) || time.Now().After(deadline) {
			t.Fatalf("produce after freeing %d bytes: %v", freeOn(t, fs), err)
		}
		<-time.After(50 * time.Millisecond)
	}
	readAcked(ctx, t, c2, topic, acked)
}

// readAcked reads partition 0 of topic from the start to its end and checks
// that every acknowledged record is there at the offset it was acknowledged
// with, and that offsets are dense.
func readAcked(ctx context.Context, t *testing.T, c *client.Client, topic string, acked map[int]int64) {
	t.Helper()
	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign(topic, 0, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	seen := map[int]int64{}
	next := int64(0)
	for {
		recs, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		for _, r := range recs {
			if r.Offset != next {
				t.Fatalf("offset %d after %d: offsets must be dense", r.Offset, next-1)
			}
			next++
			seen[int(binary.BigEndian.Uint64(r.Value))] = r.Offset
		}
	}
	for s, off := range acked {
		if got, ok := seen[s]; !ok || got != off {
			t.Fatalf("acknowledged record %d (offset %d): read at %d (found: %v)", s, off, got, ok)
		}
	}
}

// smallFS mounts a tmpfs of size bytes on a new temp dir and unmounts it
// when the test ends. Mounting needs root (CAP_SYS_ADMIN). A developer's
// run without it skips the test, saying so; in CI (CI set, or
// STRATA_E2E_NETNS=required as .ci/run sets) it fails instead, so that no
// run meant to fill a disk passes without filling one.
func smallFS(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("mount tmpfs on %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		ci := os.Getenv("CI") != "" || os.Getenv("STRATA_E2E_NETNS") == "required"
		if os.Geteuid() != 0 && !ci {
			t.Skipf("a small file system needs root to mount (%v); skipped", err)
		}
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: this one runs after the broker
	// registered later has been killed, so nothing holds the mount.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// writeFile writes n bytes to a new file at path.
func writeFile(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fillFS writes path until the file system holding it has no space left.
func fillFS(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for len(chunk) > 0 {
		_, err := f.Write(chunk)
		switch {
		case errors.Is(err, syscall.ENOSPC):
			chunk = chunk[:len(chunk)/2]
		case err != nil:
			t.Fatalf("filling %s: %v", path, err)
		}
	}
}

// freeOn is the space available on the file system holding dir.
func freeOn(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}
