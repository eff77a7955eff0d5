package s3

import (
	"errors"
	"net"
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

// Explain says in one line what an error of the store points to and what
// setting to check, for people, or "" when it is none of the kinds a
// setting explains (a missing bucket, credentials, region, an endpoint
// that cannot be reached). The SDK's own text names the operation, the
// attempts and the request ids, which tell an operator nothing.
func Explain(err error) string {
	if err == nil {
		return ""
	}
	a := classify(err)
	switch {
	case a.code == "NoSuchBucket":
		return "the bucket does not exist: create it, correct object_store.bucket, or set object_store.create_bucket"
	case a.code == "InvalidAccessKeyId":
		return "the store does not know the access key: check object_store.access_key"
	case a.code == "SignatureDoesNotMatch":
		return "the store refused the secret key: check object_store.secret_key (STRATA_OBJECT_STORE_SECRET_KEY)"
	case a.code == "AccessDenied" || a.status == http.StatusForbidden:
		return "access denied: check object_store.access_key and secret_key, and that they may read and write the bucket"
	case a.code == "AuthorizationHeaderMalformed" || a.code == "PermanentRedirect" || a.status == http.StatusMovedPermanently:
		return "the bucket is in another region: check object_store.region"
	}
	if strings.Contains(err.Error(), "failed to retrieve credentials") {
		return "no credentials: set object_store.access_key and secret_key, or AWS credentials for the standard chain"
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		return "cannot resolve the endpoint's host " + dns.Name + ": check object_store.endpoint"
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return "cannot reach the endpoint: check object_store.endpoint and that the store is running"
	}
	return ""
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
