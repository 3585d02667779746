// Package exits counts how child processes ended, by exit code or signal,
// for /metrics. It is shared scaffolding of the app use cases that start
// processes (app/acp for agents, app/processes for the processes API): app
// packages never import each other, so the one counter both need lives
// below app/internal, which imports only domain and the standard library.
package exits
