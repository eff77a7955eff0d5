package config

import "strings"

// ObjectKeyProblem returns why key is not an object key every object store
// holds the same way, or "" when it is: a slash-separated path with no
// leading or trailing slash, no empty, "." or ".." segment and no NUL byte.
//
// This is the one rule for object keys. tiering/objstore checks every key
// with it (objstore.ValidateKey), and broker validation checks
// object_store.prefix with it: every key a broker writes begins with the
// prefix, so a prefix that breaks the rule would only surface as a failed
// manifest read or upload once the broker runs. It lives here because
// config imports nothing of the project, while objstore may import config.
//
// The rule is stricter than S3's on purpose: a key that S3 would take but a
// file system could not hold (or would resolve outside its root) must fail
// in every store, not only when a broker moves from S3 to a directory.
func ObjectKeyProblem(key string) string {
	if key == "" {
		return "empty"
	}
	if strings.HasPrefix(key, "/") {
		return "leading slash"
	}
	if strings.IndexByte(key, 0) >= 0 {
		return "NUL byte"
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return "empty path segment"
		case ".", "..":
			return `"` + seg + `" segment`
		}
	}
	return ""
}
