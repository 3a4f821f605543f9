package core

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/supervaize/svz/core/contract"
)

// The mission context of a DataResource call (seed 000, "Contexte de mission pour les appels
// DataResource"; SDK 1.8.0): X-Supervaize-Mission-Id and X-Supervaize-Mission-Metadata, Studio's
// Mission.metadata object in base64url. Neither is signed: they narrow results, they are no access
// boundary.

// MaxMissionMetadataBytes bounds X-Supervaize-Mission-Metadata as received (base64url).
const MaxMissionMetadataBytes = 4096

// missionFromHeaders returns the mission of a DataResource call: nil without
// X-Supervaize-Mission-Metadata, else the mission id and its decoded metadata. The error, sent as
// a 400 detail, says what to fix.
func missionFromHeaders(h http.Header) (*contract.MissionContext, error) {
	vals := h.Values(HeaderMissionMetadata)
	if len(vals) == 0 {
		return nil, nil
	}
	if len(vals) > 1 {
		return nil, errors.New(HeaderMissionMetadata + " was sent more than once: send it once")
	}
	v := vals[0]
	if len(v) > MaxMissionMetadataBytes {
		return nil, fmt.Errorf("%s is %d bytes: at most %d bytes of base64url are accepted", HeaderMissionMetadata, len(v), MaxMissionMetadataBytes)
	}
	id := strings.TrimSpace(h.Get(HeaderMissionID))
	if id == "" {
		return nil, errors.New(HeaderMissionMetadata + " was sent without " + HeaderMissionID + ": send the mission's id with its metadata")
	}
	meta, err := DecodeMissionMetadata(v)
	if err != nil {
		return nil, err
	}
	return &contract.MissionContext{ID: h.Get(HeaderMissionID), Metadata: meta}, nil
}

// DecodeMissionMetadata decodes an X-Supervaize-Mission-Metadata value: base64url (A–Z a–z 0–9 -
// _, padding optional but exact when present) of a UTF-8 JSON object, at most
// MaxMissionMetadataBytes as received. It returns the object, compacted.
func DecodeMissionMetadata(v string) (json.RawMessage, error) {
	if len(v) > MaxMissionMetadataBytes {
		return nil, fmt.Errorf("%s is %d bytes: at most %d bytes of base64url are accepted", HeaderMissionMetadata, len(v), MaxMissionMetadataBytes)
	}
	data := strings.TrimRight(v, "=")
	pad := len(v) - len(data)
	badPadding := pad > 0 && (pad > 2 || len(v)%4 != 0)
	for i := 0; i < len(data) && !badPadding; i++ {
		c := data[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			badPadding = true
		}
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(data)
	if badPadding || err != nil {
		return nil, errors.New(HeaderMissionMetadata + " must be base64url (A-Z a-z 0-9 - _, padding optional) of a UTF-8 JSON object")
	}
	if !utf8.Valid(raw) {
		return nil, errors.New(HeaderMissionMetadata + " must decode to UTF-8 text: a JSON object")
	}
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	var buf bytes.Buffer
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Compact(&buf, raw) != nil {
		return nil, errors.New(HeaderMissionMetadata + " must decode to a JSON object (the mission's metadata)")
	}
	return buf.Bytes(), nil
}
