package cloudtasks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// MetadataHost is the metadata server of Cloud Run (and every GCP runtime); GCE_METADATA_HOST,
// the variable Google's own libraries read, replaces it (tests, emulators).
const MetadataHost = "metadata.google.internal"

// MetadataToken returns a token source reading the access token of the instance's service
// account from the metadata server at host, cached until a minute before it expires.
func MetadataToken(host string, hc *http.Client) func(ctx context.Context) (string, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	var mu sync.Mutex
	var tok string
	var until time.Time
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if time.Now().Before(until) { // until is set with a token only
			return tok, nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/computeMetadata/v1/instance/service-accounts/default/token", nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Metadata-Flavor", "Google")
		resp, err := hc.Do(req)
		if err != nil {
			return "", fmt.Errorf("metadata server: %w", err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if err != nil {
			return "", fmt.Errorf("metadata server: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("metadata server: status %d", resp.StatusCode)
		}
		var t struct {
			AccessToken string `json:"access_token"`
			ExpiresIn   int64  `json:"expires_in"`
		}
		if err := json.Unmarshal(b, &t); err != nil || t.AccessToken == "" {
			return "", fmt.Errorf("metadata server: no access token in its answer")
		}
		tok, until = t.AccessToken, time.Now().Add(time.Duration(t.ExpiresIn)*time.Second-time.Minute)
		return tok, nil
	}
}
