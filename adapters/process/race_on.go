//go:build race

package process

// raceBuild: under the race detector, code compiled into a sub-supervisor
// may still call into the race runtime (coverage counters in atomic mode
// do), which must not happen in memory shared with the supervisor; so
// sub-supervisors are forked (a copy of the memory) instead.
const raceBuild = true
