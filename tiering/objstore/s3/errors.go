package s3

import (
	"errors"
	"net/http"
	"strings"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// apiError is what the store said: the HTTP status and the S3 error code
// (empty when the response had no body, as for HEAD).
type apiError struct {
	status int
	code   string
}

func classify(err error) apiError {
	var a apiError
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		a.status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		a.code = ae.ErrorCode()
	}
	return a
}

// notFound: no object has the key. A 404 about the bucket or an upload is
// a configuration or a protocol problem, not a missing object, and is not
// folded into objstore.ErrNotFound. (A HEAD of a missing bucket cannot be
// told apart: its 404 has no body.)
func (a apiError) notFound() bool {
	switch a.code {
	case "NoSuchKey":
		return true
	case "NoSuchBucket", "NoSuchUpload":
		return false
	}
	return a.status == http.StatusNotFound
}

// preconditionFailed: a conditional request lost. S3 answers 412 when the
// condition is false, and 409 ConditionalRequestConflict when a concurrent
// write to the same key won the race while this one was in flight: either
// way the caller must read again before it retries.
func (a apiError) preconditionFailed() bool {
	return a.status == http.StatusPreconditionFailed || a.code == "PreconditionFailed" ||
		a.code == "ConditionalRequestConflict"
}

// invalidRange: a range GET started at or past the object's end.
func (a apiError) invalidRange() bool {
	return a.status == http.StatusRequestedRangeNotSatisfiable || a.code == "InvalidRange"
}

// ETags travel quoted in HTTP headers and are kept unquoted in ObjectInfo,
// as minio-go and most tools show them.
func unquote(etag *string) string {
	if etag == nil {
		return ""
	}
	return strings.Trim(*etag, `"`)
}

func quote(etag string) *string {
	q := `"` + strings.Trim(etag, `"`) + `"`
	return &q
}
