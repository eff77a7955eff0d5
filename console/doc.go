// Package console is Strata's operator console: server-rendered HTML pages
// of the cluster, its topics (both tiers), partition timelines and consumer
// groups, served by every broker on its admin listener at /ui.
//
// Everything it serves is in the binary (embed): the templates, one CSS
// file and htmx (static/htmx.min.js, fetched by `make ui-vendor` at a
// pinned version and sha256, committed). Pages are whole HTML documents;
// the figures on them sit in fragments that htmx polls every two seconds
// (the same URL with ?live=1), so they refresh without reloading the page
// and without any script of Strata's own. Every response carries a strict
// Content-Security-Policy: scripts and styles come from /ui/static only,
// never inline.
//
// The console reads its broker through Source (source.go), which
// *broker.Broker implements: it holds no copy of the broker's logic, and
// sees the cluster as that broker does (the figures of partitions held
// elsewhere are the metadata's alone, as in `strata topic describe`).
//
// Authentication and authorization are the broker's own (broker.Auth), as
// for the gRPC API: see auth.go.
package console
