//go:build !svz_nocloudrun

package platform

// withCloudRun tells the tests whether this build serves Cloud Run.
const withCloudRun = true
