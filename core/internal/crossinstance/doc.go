// Package crossinstance holds the tests and benchmarks that run several controller processes on
// one store, for every backend: the effect stream of one controller, whichever instance ran the
// action and whichever instance the stream is opened on. It has no code of its own: the test
// binary is also the controller process it starts (see TestMain).
package crossinstance
