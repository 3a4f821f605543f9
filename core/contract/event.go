package contract

// EffectEvent is the data of a supervaizer.effect event on the effect stream (spec §2.8): the
// effects of one dispatched action, [] when it had none.
type EffectEvent struct {
	AgentSlug string   `json:"agent_slug"`
	Action    string   `json:"action"`
	RequestID string   `json:"request_id"`
	Effects   []Effect `json:"effects" wire:"nonnil"`
}

// MarshalJSON writes the event data.
func (ev EffectEvent) MarshalJSON() ([]byte, error) { return marshal(&ev) }

func (ev *EffectEvent) wire(e *encoder) error { return e.object(ev, nil) }
