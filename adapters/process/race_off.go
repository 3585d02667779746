//go:build !race

package process

// raceBuild is false: see race_on.go.
const raceBuild = false
