// Package processes is the use case behind /v1/processes: commands run to
// completion (run), and managed processes whose lifetime is decoupled from
// any connection (create, list, signal, delete), with their output kept in a
// bounded log that any number of readers follow, their stdin, and their
// terminal when they have one.
//
// Processes are started through ports.ProcessStarter, each in a process
// group of its own that is signalled and reaped as a whole. Every limit is
// explicit: live processes (429 past it), run output (truncation flags),
// log bytes per process (oldest output evicted, readers told of the gap),
// input bytes per request (413), exited records kept.
package processes
