// Package app holds the use cases: ACP instances (bootstrap, post,
// subscribe, delete, list), agent resolution, and the pieces they are made of
// (the per-instance event log with its cursors, the pending-request table).
//
// app talks to the world only through ports and afero.Fs; it never sees
// net/http, os/exec or wazero, so it is tested with fake ports and
// testing/synctest.
package app
