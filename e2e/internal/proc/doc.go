// Package proc reads what the black-box tests, the soak run and the
// benchmark comparison need to know about processes from Linux's /proc:
// states and process groups (to prove nothing leaks), CPU time, memory and
// open descriptors. One reader, so the parsing of /proc/<pid>/stat (whose
// command field may hold spaces and parentheses) is written once.
package proc
