package objstore

import (
	"fmt"

	"github.com/strata-log/strata/config"
)

// ValidateKey reports whether key is a key every implementation stores the
// same way, by the one rule for object keys (config.ObjectKeyProblem): a
// slash-separated path with no leading or trailing slash, no empty, "." or
// ".." segment and no NUL byte. The stores check keys themselves; it is
// exported so that implementations outside this package (S3) refuse
// exactly the same keys, and so that callers building keys can check them
// early. Broker validation checks object_store.prefix by the same rule, so
// a prefix no key could start with stops the broker at start.
func ValidateKey(key string) error {
	if reason := config.ObjectKeyProblem(key); reason != "" {
		return fmt.Errorf("objstore: invalid key %q: %s", key, reason)
	}
	return nil
}
