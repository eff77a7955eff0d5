package tiering

import (
	"bytes"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
	"github.com/strata-log/strata/tiering/objstore/s3"
)

// TestVerifyAgainstMinIO: a cold tier uploaded to a real MinIO under a
// key prefix, as a broker with object_store.prefix writes it, verified
// through the read-only prefixed view the strata bucket commands use. Then
// an object deleted and an orphan added behind the code's back, with
// minio-go, are found.
func TestVerifyAgainstMinIO(t *testing.T) {
	srv := miniotest.Start(t)
	ctx := testContext(t)
	bucket, err := s3.New(ctx, srv.S3Config())
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "cluster-a"
	vt := buildTier(t, objstore.WithPrefix(bucket, prefix), testRef, 120)
	view := objstore.ReaderWithPrefix(bucket, prefix)

	rep := verify(t, view, VerifyOptions{Records: true})
	wantSound(t, rep)
	if rep.Partitions != 1 || rep.Segments != len(vt.segs) || rep.Batches != vt.batches || len(rep.Orphans) != 0 {
		t.Fatalf("report %+v", rep)
	}
	rows, err := ListBucket(ctx, view, "")
	if err != nil || len(rows) != 1 || rows[0].Ref != testRef || rows[0].Segments != len(vt.segs) || rows[0].EndOffset != vt.segs[len(vt.segs)-1].LastOffset+1 {
		t.Fatalf("ls: %+v, %v", rows, err)
	}

	gone := vt.segs[1]
	if err := srv.Client.RemoveObject(ctx, srv.Bucket, prefix+"/"+gone.Key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	orphan := testRef.SegmentPrefix() + "00000000000000099999-1-0badc0de.seg"
	junk := bytes.Repeat([]byte("x"), 1234)
	if _, err := srv.Client.PutObject(ctx, srv.Bucket, prefix+"/"+orphan, bytes.NewReader(junk), int64(len(junk)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	rep = verify(t, view, VerifyOptions{})
	wantProblem(t, rep, gone.Key, "missing")
	if len(rep.Problems) != 1 || len(rep.Orphans) != 1 || rep.Orphans[0].Key != orphan || rep.OrphanBytes != int64(len(junk)) {
		t.Fatalf("report %+v\n%s", rep, problemLines(rep))
	}
}
