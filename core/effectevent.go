package core

import "github.com/supervaize/svz/core/contract"

// encodeEffectEvent encodes the data of the supervaizer.effect event announcing the effects of
// a dispatched action, in one pass (contract's wire encoder, as for results).
func encodeEffectEvent(req *contract.ActionRequest, effects []contract.Effect) ([]byte, error) {
	buf := make([]byte, 0, 128+160*len(effects)) // kept by the event buffer: sized once, not grown
	return contract.AppendJSON(buf, &contract.EffectEvent{
		AgentSlug: req.AgentSlug, Action: req.Action, RequestID: req.RequestID, Effects: effects,
	})
}
