package exchange

import "github.com/stategate/stategate/exchange/admission"

// RepeatedHeader returns the name of an identity header that h repeats ("" for none):
// admission.RepeatedHeader with this Core's principal header.
func (c *Core) RepeatedHeader(h Headers) string {
	return admission.RepeatedHeader(h, c.facts.principal)
}
