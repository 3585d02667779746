// Package porttest holds what every implementation of a port is held to:
// contract suites (tests that the real adapter and the test fakes alike must
// pass, run from the adapters' own tests) and the fakes themselves.
//
// The filesystem port is afero.Fs; FSContract checks the behaviour of it
// that the app relies on.
package porttest
