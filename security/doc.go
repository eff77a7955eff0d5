// Package security holds what Strata needs to know who is calling and what
// they may do: TLS material that follows its files (rotation without a
// restart), broker identities in certificates (broker-<id>.<cluster>),
// principals from certificates or bearer tokens, ACL matching, and the
// key derivation of SCRAM credentials (scram.go). It
// imports nothing internal. The rules that use it (who a caller is, what
// it may do and see) are broker's (broker/auth.go, authz.go,
// visibility.go); cluster stores the ACLs; the front ends and cmd/strata
// wire it in.
package security
