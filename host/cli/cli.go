// Package cli is the work of stategate's commands once their flags are parsed (package
// main parses them): the admin commands over the admin API's client (ops.Client), check,
// explain, call and version. Output goes to the writers given; errors carry the exit
// status (ExitError).
package cli

// ExitError ends a command with status Code, printing Msg (when not empty) as it is: the
// command's own words, not prefixed "stategate: " as other errors are.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }
