// Package domain is the vocabulary of the daemon: ids, frames, launch specs,
// error kinds and the other values that cross package boundaries.
//
// It does no I/O and imports nothing of ours and nothing third-party, so every
// other package can depend on it and it can be tested with plain tables and
// fuzz targets. The pure functions here (frame classification, id
// canonicalisation, path validation) are the parsers everything else trusts.
package domain
