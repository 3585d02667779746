// Package ports holds the interfaces the app needs from the world it does not
// control: processes, untrusted policy code. Each is written from the app's
// side, small and stdlib-shaped; ports/porttest holds the contract suites
// every implementation (real adapter and test fake alike) must pass.
//
// The filesystem port is afero.Fs itself and is not wrapped here.
package ports
