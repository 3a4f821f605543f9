package contract

import (
	"errors"
	"fmt"
	"strings"
)

// Parameter declares one setting of an agent that the operator configures in Studio
// (the reference's Parameter, its registration_info in parameters_setup). Studio sends the values
// encrypted to the controller's public key; the agent reads them through core.Parameter.
// Description is written as null when empty.
type Parameter struct {
	Name        string `json:"name"`        // as the agent's code reads it, e.g. OPENAI_API_KEY
	Description string `json:"description"` // shown in Studio
	// IsEnvironment exports the value to the process environment under Name, as the reference does.
	IsEnvironment bool `json:"is_environment"`
	// IsSecret hides the value in Studio's interface.
	IsSecret bool `json:"is_secret"`
	// IsRequired is shown in Studio's interface.
	IsRequired bool  `json:"is_required"`
	Extra      Extra `json:"-"`
}

// ValidateParameters reports every reason params is not a valid parameters_setup, or nil: names
// are non-blank and unique, and an environment parameter's name is a valid environment variable
// name (letters, digits and underscores, not starting with a digit).
func ValidateParameters(params []Parameter) error {
	var p problems
	seen := make(map[string]bool, len(params))
	for i, prm := range params {
		at := fmt.Sprintf("[%d].name", i)
		switch {
		case strings.TrimSpace(prm.Name) == "":
			p.add(at, msgNonEmpty)
			continue
		case seen[prm.Name]:
			p.add(at, "parameter '%s' is declared twice; each parameter name must be unique", prm.Name)
		case prm.IsEnvironment && !envName(prm.Name):
			p.add(at, "environment parameter '%s' must be a valid environment variable name (letters, digits, underscores; not starting with a digit)", prm.Name)
		}
		seen[prm.Name] = true
	}
	return errors.Join(p...)
}

func envName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z'):
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// MarshalJSON writes the parameter's registration_info; description null when empty.
func (prm Parameter) MarshalJSON() ([]byte, error) {
	type wire struct {
		Name          string     `json:"name"`
		Description   nullString `json:"description"`
		IsEnvironment bool       `json:"is_environment"`
		IsSecret      bool       `json:"is_secret"`
		IsRequired    bool       `json:"is_required"`
	}
	return encodeObject(wire{prm.Name, nullString(prm.Description), prm.IsEnvironment, prm.IsSecret, prm.IsRequired}, prm.Extra)
}

// UnmarshalJSON decodes a parameter, keeping unknown members.
func (prm *Parameter) UnmarshalJSON(data []byte) error {
	type wire struct {
		Name          string     `json:"name"`
		Description   nullString `json:"description"`
		IsEnvironment bool       `json:"is_environment"`
		IsSecret      bool       `json:"is_secret"`
		IsRequired    bool       `json:"is_required"`
	}
	var w wire
	var extra Extra
	if err := decodeInto(data, "parameter", &w, &extra); err != nil {
		return err
	}
	*prm = Parameter{Name: w.Name, Description: string(w.Description), IsEnvironment: w.IsEnvironment, IsSecret: w.IsSecret, IsRequired: w.IsRequired, Extra: extra}
	return nil
}
