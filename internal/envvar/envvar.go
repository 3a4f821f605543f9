// Package envvar parses settings strictly: one parser per kind of value (boolean, integer,
// duration, enumeration), so every binary accepts and refuses the same spellings. A value that is
// set but not understood is an error naming the variable, the value (never for a secret: these
// parsers are for non-secret settings) and the accepted values; an unset or blank value gives the
// default.
package envvar

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Getenv reads one variable, like os.Getenv.
type Getenv func(string) string

// Bool parses a boolean: true, 1, yes, on or false, 0, no, off, in any case, surrounding spaces
// ignored. Unset or blank gives def.
func Bool(getenv Getenv, name string, def bool) (bool, error) {
	v := strings.TrimSpace(getenv(name))
	switch strings.ToLower(v) {
	case "":
		return def, nil
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q is not a boolean: use true or false (also accepted: 1/0, yes/no, on/off)", name, v)
}

// Int parses a base-10 integer within [lo, hi]. Unset or blank gives def.
func Int(getenv Getenv, name string, def, lo, hi int64) (int64, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q: must be a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// Duration parses a Go duration ("30s", "5m", "1h30m") within [lo, hi]. Unset or blank gives def.
func Duration(getenv Getenv, name string, def, lo, hi time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		return 0, fmt.Errorf("%s=%q: must be a duration such as 30s, 5m or 1h, from %s to %s", name, v, lo, hi)
	}
	return d, nil
}

// Enum parses one of accepted (compared case-insensitively; the accepted spelling is returned).
// Unset or blank gives def.
func Enum(getenv Getenv, name, def string, accepted ...string) (string, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	for _, a := range accepted {
		if strings.EqualFold(v, a) {
			return a, nil
		}
	}
	return "", fmt.Errorf("%s=%q: must be one of %s", name, v, strings.Join(accepted, ", "))
}
