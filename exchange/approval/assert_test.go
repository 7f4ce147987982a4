package approval

// The gateway's stores of held calls and questions are what the exchange asks for.
var (
	_ Holder   = (*Hold)(nil)
	_ Elicitor = (*Elicit)(nil)
)
