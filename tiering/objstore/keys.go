package objstore

import (
	"fmt"
	"strings"
)

// ValidateKey reports whether key is a key every implementation stores the
// same way: a slash-separated path with no leading or trailing slash, no
// empty, "." or ".." segment and no NUL byte. The stores check keys
// themselves; it is exported so that implementations outside this package
// (S3) refuse exactly the same keys, and so that callers building keys can
// check them early.
//
// The rule is stricter than S3's on purpose: a key that S3 would take but a
// file system could not hold (or would resolve outside its root) must fail
// in every store, not only when a broker moves from S3 to a directory.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("objstore: invalid key %q: empty", key)
	}
	if strings.HasPrefix(key, "/") {
		return fmt.Errorf("objstore: invalid key %q: leading slash", key)
	}
	if strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("objstore: invalid key %q: NUL byte", key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("objstore: invalid key %q: empty path segment", key)
		case ".", "..":
			return fmt.Errorf("objstore: invalid key %q: %q segment", key, seg)
		}
	}
	return nil
}
