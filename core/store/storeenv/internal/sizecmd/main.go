// Command sizecmd opens the store the environment chooses, then serves HTTP like a controller
// does. sizes.sh builds it with each backend left in or out to measure what a backend adds to a
// stripped binary that already links net/http (and so crypto/tls), as every controller does.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/supervaize/svz/core/store/storeenv"
)

func main() {
	s, err := storeenv.Open(context.Background(), os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer s.Close()
	if addr := os.Getenv("ADDR"); addr != "" {
		fmt.Fprintln(os.Stderr, http.ListenAndServe(addr, nil))
	}
}
