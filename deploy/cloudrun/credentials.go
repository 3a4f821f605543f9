package cloudrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/oauth2/google"
)

// Scope is the OAuth2 scope svz deploy asks Application Default Credentials for.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// ErrNoCredentials is returned (wrapped) when Application Default Credentials found nothing.
var ErrNoCredentials = errors.New("no Google Cloud credentials found")

// noCredentials is svz's message when no source of Application Default Credentials exists: the
// client libraries' own message only links to a page.
const noCredentials = "run gcloud auth application-default login, or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file; " +
	"svz deploy reads Application Default Credentials (that variable, gcloud's application_default_credentials.json, the metadata server on Google Cloud)"

// CheckCredentials finds Application Default Credentials before the clients are dialed, so that
// having none is reported with its fix; credentials that exist but cannot be read are reported
// with the library's reason.
func CheckCredentials(ctx context.Context) error {
	_, err := google.FindDefaultCredentials(ctx, Scope)
	if err == nil {
		return nil
	}
	if os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") == "" {
		if _, statErr := os.Stat(gcloudCredentialsFile()); errors.Is(statErr, os.ErrNotExist) {
			return fmt.Errorf("%w: %s", ErrNoCredentials, noCredentials)
		}
	}
	return fmt.Errorf("application default credentials cannot be used: %w", err)
}

// gcloudCredentialsFile is where gcloud auth application-default login writes the credentials,
// the file the client libraries read when GOOGLE_APPLICATION_CREDENTIALS is unset.
func gcloudCredentialsFile() string {
	const f = "application_default_credentials.json"
	if runtime.GOOS == "windows" {
		return filepath.Join(os.Getenv("APPDATA"), "gcloud", f)
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".config", "gcloud", f)
}
