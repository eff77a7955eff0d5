package s3

import (
	"errors"
	"fmt"
)

// Part sizes of multipart uploads. S3 refuses parts under 5 MiB (except the
// last) and uploads of more than 10,000 parts.
const (
	// DefaultPartSize is used when Config.PartSize is zero: a 1 GiB
	// segment goes up in 64 parts, and a Writer holds 16 MiB at most.
	DefaultPartSize = 16 << 20
	// MinPartSize is the smallest part S3 accepts.
	MinPartSize = 5 << 20
	// maxParts is the most parts one upload may have.
	maxParts = 10_000
)

// Config says which bucket to use and how to reach it.
type Config struct {
	// Endpoint is the store's base URL, such as "http://127.0.0.1:9000"
	// for MinIO; empty means AWS S3 itself.
	Endpoint string
	// Region signs the requests. Empty means the standard AWS settings
	// (AWS_REGION, the shared config file) or, with an Endpoint set,
	// "us-east-1", which MinIO and most compatible stores accept.
	Region string
	// Bucket is the bucket every key lives in. It must exist.
	Bucket string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key)
	// rather than in the host name (bucket.endpoint/key), as MinIO and
	// most self-hosted stores need.
	PathStyle bool
	// AccessKey and SecretKey are static credentials. Both empty means the
	// standard AWS credential chain (environment, shared files, instance
	// or task role).
	AccessKey string
	SecretKey string
	// PartSize is the size of the parts of a multipart upload, and so the
	// most a Writer buffers; objects smaller than one part go up in one
	// PUT. Zero means DefaultPartSize.
	PartSize int64
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	if c.Bucket == "" {
		return errors.New("s3: config: Bucket is required")
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return errors.New("s3: config: AccessKey and SecretKey go together: set both, or neither for the AWS credential chain")
	}
	if c.PartSize != 0 && c.PartSize < MinPartSize {
		return fmt.Errorf("s3: config: PartSize %d is below S3's minimum part of %d bytes", c.PartSize, MinPartSize)
	}
	return nil
}

func (c Config) partSize() int64 {
	if c.PartSize == 0 {
		return DefaultPartSize
	}
	return c.PartSize
}
