package ops

import (
	"fmt"
	"os"
	"strings"
)

// TokenEnv names the environment variable holding the admin token (the gateway's and the
// admin commands').
const TokenEnv = "STATEGATE_ADMIN_TOKEN"

// ReadToken reads the admin token: the file's content (trimmed), else the environment.
func ReadToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(TokenEnv)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("admin: token file[%s]: %w", file, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("admin: token file[%s] is empty", file)
	}
	return tok, nil
}
